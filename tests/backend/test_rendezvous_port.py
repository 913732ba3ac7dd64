"""A gang's rendezvous port: chosen by the node hosting rank 0 at its claim, learnt by the others.

The scheduler chooses no port (a fixed 29500 + attempt id collided with other Trainboards'
and torchrun jobs' stores on a busy host): rank 0's node sends one free there with its
claim; the other nodes read it from their claim's answer or from the rendezvous route.
"""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient

from backend.config import Settings
from backend.db import Database
from tests.backend.conftest import bearer, node_pool_scheduler
from tests.backend.test_jobs_api import queued_orders
from tests.security.test_node_binding import _node_token
from workers.contract.protocol import NodeDevice, NodeRegistration

TWO_NODES = {"name": "gang", "template": "mlp", "parallelism": {"devices": 2, "nodes": 2}}


def _register(api: TestClient, name: str, token: dict[str, str], seen: dict[str, str]) -> str:
    instance = uuid.uuid4().hex
    registration = NodeRegistration(
        name=name,
        instance=instance,
        hostname=name,
        address="127.0.0.1",
        devices=[NodeDevice(index=0, kind="cpu", name="CPU slot 0")],
        data_dir="/",
        storage_seen=seen,  # one shared run root: a multi-node job needs it
    )
    answer = api.post("/api/nodes/register", json=registration.model_dump(), headers=token)
    assert answer.status_code == 200, answer.text
    return instance


def test_rank_zeros_node_chooses_the_port_and_the_other_node_learns_it(
    api: TestClient, tokens: dict[str, str], settings: Settings, database: Database
) -> None:
    heads = {"n1": bearer(tokens["node"]), "n2": bearer(_node_token(database, "n2"))}
    first = _register(api, "n1", heads["n1"], {})
    _register(api, "n2", heads["n2"], {"n1": first})
    assert api.post("/api/jobs", json=TWO_NODES, headers=bearer(tokens["alice"])).status_code == 201
    client = api.app.state.redis  # type: ignore[attr-defined]
    node_pool_scheduler(database, client, settings.redis_url).tick()
    orders = {o["node_rank"]: o for name in heads for o in queued_orders(client, name)}
    assert sorted(orders) == [0, 1] and {o["master_port"] for o in orders.values()} == {0}
    lead, peer = orders[0]["node"], orders[1]["node"]
    url = f"/api/attempts/{orders[0]['attempt_id']}"

    chosen_by_peer = api.post(
        f"{url}/claim", json={"node": peer, "master_port": 41234}, headers=heads[peer]
    )
    assert chosen_by_peer.status_code == 422, chosen_by_peer.text
    assert chosen_by_peer.json()["detail"][0]["loc"] == ["body", "master_port"]
    assert "node rank 0" in chosen_by_peer.text
    early = api.post(f"{url}/claim", json={"node": peer}, headers=heads[peer])
    assert early.json() == {"claimed": True, "master_port": None}  # rank 0's node not yet
    waiting = api.get(f"{url}/rendezvous", headers=heads[peer])
    assert waiting.json() == {"master_port": None, "live": True}

    out_of_range = api.post(
        f"{url}/claim", json={"node": lead, "master_port": 70000}, headers=heads[lead]
    )
    assert out_of_range.status_code == 422 and "master_port" in out_of_range.text
    won = api.post(f"{url}/claim", json={"node": lead, "master_port": 41234}, headers=heads[lead])
    assert won.json() == {"claimed": True, "master_port": 41234}
    assert api.get(f"{url}/rendezvous", headers=heads[peer]).json() == {
        "master_port": 41234,
        "live": True,
    }
    api.post("/api/jobs/1/cancel", headers=bearer(tokens["alice"]))
    for name in heads:
        api.post(f"{url}/finish", json={"outcome": "stopped"}, headers=heads[name])
    assert api.get(f"{url}/rendezvous", headers=heads[peer]).json()["live"] is False


def test_the_rendezvous_route_answers_only_the_gangs_nodes(
    api: TestClient, tokens: dict[str, str], settings: Settings, database: Database
) -> None:
    n1 = bearer(tokens["node"])
    _register(api, "n1", n1, {})
    spec = {"name": "one", "template": "mlp"}
    assert api.post("/api/jobs", json=spec, headers=bearer(tokens["alice"])).status_code == 201
    client = api.app.state.redis  # type: ignore[attr-defined]
    node_pool_scheduler(database, client, settings.redis_url).tick()
    attempt = queued_orders(client, "n1")[0]["attempt_id"]
    n2 = bearer(_node_token(database, "n2"))
    assert api.get(f"/api/attempts/{attempt}/rendezvous", headers=n2).status_code == 404
    assert api.get(f"/api/attempts/{attempt}/rendezvous", headers=n1).status_code == 200
    reader = bearer(tokens["alice"])
    assert api.get(f"/api/attempts/{attempt}/rendezvous", headers=reader).status_code == 403
