"""Registration checks for nodes on several hosts (#23): address, interface, run-root groups."""

from __future__ import annotations

import uuid
from typing import Any

import redis
from fastapi.testclient import TestClient
from sqlalchemy import select

from backend.config import Settings
from backend.db import Database
from backend.executors.nodes import capacities
from backend.jobs.attempts import claim, finish
from backend.jobs.fencing import register
from backend.jobs.models import Attempt, AttemptSlice, Job
from backend.placement.policy import NodeCapacity, QueuedJob, plan
from tests.backend.conftest import bearer, node_pool_scheduler
from workers.contract.protocol import AttemptOutcome, NodeDevice, NodeRegistration


def registration(name: str, **fields: Any) -> NodeRegistration:
    values: dict[str, Any] = {
        "name": name,
        "instance": uuid.uuid4().hex,
        "hostname": name,
        "address": "10.0.0.2",
        "interface": "eth0",
        "api_host": "10.0.0.1",
        "devices": [NodeDevice(index=i, kind="cpu", name=f"slot {i}") for i in range(2)],
        "data_dir": "/srv/trainboard",
        **fields,
    }
    return NodeRegistration(**values)


def registered(database: Database, client: redis.Redis, node: NodeRegistration) -> Any:
    with database.session() as session:
        row, _ = register(session, client, registration=node)
        return row.state, row.state_reason, row.storage


def test_a_loopback_address_with_the_api_elsewhere_is_misconfigured_and_gets_no_work(
    api: TestClient, database: Database, tokens: dict[str, str]
) -> None:
    client = api.app.state.redis  # type: ignore[attr-defined]
    state, reason, _ = registered(database, client, registration("n1", address="127.0.0.1"))
    assert state == "misconfigured"
    assert "127.0.0.1 is loopback while the API is at 10.0.0.1" in reason
    with database.session() as session:
        assert capacities(session) == []
    shown = api.get("/api/nodes", headers=bearer(tokens["admin"])).json()["nodes"][0]
    assert (shown["state"], shown["state_reason"], shown["interface"]) == (
        "misconfigured",
        reason,
        "eth0",
    )
    # the same worker with a derived address registers up again
    state, reason, _ = registered(database, client, registration("n1"))
    assert (state, reason) == ("up", None)


def test_an_address_on_none_of_the_hosts_interfaces_is_misconfigured(
    api: TestClient, database: Database
) -> None:
    client = api.app.state.redis  # type: ignore[attr-defined]
    state, reason, _ = registered(database, client, registration("n1", interface=None))
    assert state == "misconfigured" and "on none of this host's interfaces" in reason


def test_loopback_everywhere_is_one_machine_and_fine(api: TestClient, database: Database) -> None:
    client = api.app.state.redis  # type: ignore[attr-defined]
    node = registration("n1", address="127.0.0.1", interface="lo", api_host="127.0.0.1")
    assert registered(database, client, node)[:2] == ("up", None)


def test_nodes_that_see_each_others_markers_share_a_run_root_group(
    api: TestClient, database: Database
) -> None:
    client = api.app.state.redis  # type: ignore[attr-defined]
    n1 = registration("n1")
    first = registered(database, client, n1)[2]
    assert first == n1.instance  # alone so far: a group of its own
    assert (
        registered(database, client, registration("n2", storage_seen={"n1": n1.instance}))[2]
        == first
    )
    stale = {"n1": uuid.uuid4().hex}  # a copy of an old marker proves nothing
    assert registered(database, client, registration("n3", storage_seen=stale))[2] != first
    with database.session() as session:
        groups = {c.name: c.storage for c in capacities(session)}
    assert groups["n1"] == groups["n2"] != groups["n3"]


def test_a_multi_node_job_is_placed_only_inside_one_run_root_group() -> None:
    job = QueuedJob(id=1, devices=2, nodes=2)
    apart = [NodeCapacity("a", 1, (0,), "g1"), NodeCapacity("b", 1, (0,), "g2")]
    waiting = plan([job], apart).waiting[1]
    assert "sharing one checkpoint location (run root)" in waiting
    mixed = [*apart, NodeCapacity("c", 1, (0,), "g1")]
    (placed,) = plan([job], mixed).placements
    assert sorted(name for name, _ in placed.slices) == ["a", "c"]
    assert plan([QueuedJob(id=2, devices=1)], apart).placements  # one node needs no sharing


def test_a_rendezvous_failure_restarts_without_spending_max_restarts(
    api: TestClient, settings: Settings, database: Database, tokens: dict[str, str]
) -> None:
    client = api.app.state.redis  # type: ignore[attr-defined]
    nodes = [registration("n1"), registration("n2", storage_seen={})]
    registered(database, client, nodes[0])
    nodes[1].storage_seen = {"n1": nodes[0].instance}
    registered(database, client, nodes[1])
    spec = {
        "name": "two-hosts",
        "template": "mlp",
        "parallelism": {"devices": 2, "nodes": 2},
        "max_restarts": 1,
    }
    job_id = api.post("/api/jobs", json=spec, headers=bearer(tokens["alice"])).json()["id"]
    scheduler = node_pool_scheduler(database, client, settings.redis_url)
    scheduler.tick()
    alice = bearer(tokens["alice"])
    (shown,) = api.get(f"/api/jobs/{job_id}/attempts", headers=alice).json()
    placed = {"n1": [0], "n2": [0]}  # every slice, not rank 0's only
    assert {p["node"]: p["devices"] for p in shown["placement"]} == placed
    assert {
        p["node"] for p in api.get(f"/api/jobs/{job_id}", headers=alice).json()["placement"]
    } == {
        "n1",
        "n2",
    }
    with database.session() as session:
        attempt_id = session.scalars(select(Attempt.id).where(Attempt.job_id == job_id)).one()
        for node in nodes:
            assert claim(session, attempt_id=attempt_id, node=node.name, instance=node.instance)
        failed = AttemptOutcome(
            outcome="failed",
            node="n2",
            instance=nodes[1].instance,
            reason="node n2: rendezvous failed: rank 1 could not reach master 10.0.0.2:29501",
            platform_fault=True,
        )
        finish(session, client, attempt_id=attempt_id, node="n2", outcome=failed)
        job = session.get_one(Job, job_id)
        assert (job.state, job.restarts) == ("restarting", 0)
        assert "[gang: n1 at 10.0.0.2 (eth0), n2 at 10.0.0.2 (eth0)]" in (job.reason or "")
        slices = session.scalars(
            select(AttemptSlice.state).where(AttemptSlice.attempt_id == attempt_id)
        )
        assert "running" not in list(slices)
