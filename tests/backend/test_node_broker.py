"""A node whose Redis is not the API's cannot receive work: it is misconfigured, with why."""

from __future__ import annotations

from fastapi.testclient import TestClient

from backend.nodes.deployment import WRONG_REDIS
from tests.backend.conftest import bearer
from workers.contract.keys import deployment_marker
from workers.contract.protocol import NodeDevice, NodeRegistration

INSTANCE = "a" * 32


def register(api: TestClient, token: str, seen: list[str] | None) -> dict[str, object]:
    registration = NodeRegistration(
        name="n1",
        instance=INSTANCE,
        hostname="h",
        address="127.0.0.1",
        devices=[NodeDevice(index=0, kind="cpu", name="CPU slot 0")],
        deployments_seen=seen,
    )
    answer = api.post("/api/nodes/register", json=registration.model_dump(), headers=bearer(token))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert isinstance(body, dict)
    return body


def node(api: TestClient, token: str) -> dict[str, object]:
    (shown,) = api.get("/api/nodes", headers=bearer(token)).json()["nodes"]
    assert isinstance(shown, dict)
    return shown


def test_a_worker_on_another_redis_is_misconfigured_and_recovers_when_it_sees_ours(
    api: TestClient, tokens: dict[str, str]
) -> None:
    ours = register(api, tokens["node"], seen=None)["deployment"]
    assert isinstance(ours, str) and len(ours) == 32
    redis = api.app.state.redis  # type: ignore[attr-defined]
    assert redis.get(deployment_marker(ours)) == ours.encode()  # the API keeps its marker
    register(api, tokens["node"], seen=["f" * 32])  # its Redis holds another deployment's
    shown = node(api, tokens["alice"])
    assert (shown["state"], shown["state_reason"]) == ("misconfigured", WRONG_REDIS)
    beat = {"instance": INSTANCE, "deployment_seen": True}
    assert api.post("/api/nodes/n1/heartbeat", json=beat, headers=bearer(tokens["node"])).is_success
    assert (node(api, tokens["alice"])["state"], node(api, tokens["alice"])["state_reason"]) == (
        "up",
        None,
    )
    beat["deployment_seen"] = False
    assert api.post("/api/nodes/n1/heartbeat", json=beat, headers=bearer(tokens["node"])).is_success
    assert node(api, tokens["alice"])["state"] == "misconfigured"


def test_a_flushed_api_redis_is_not_blamed_on_the_node(
    api: TestClient, tokens: dict[str, str]
) -> None:
    ours = register(api, tokens["node"], seen=None)["deployment"]
    redis = api.app.state.redis  # type: ignore[attr-defined]
    redis.flushdb()  # our own marker is gone: the node cannot have seen it
    register(api, tokens["node"], seen=[])
    assert node(api, tokens["alice"])["state"] == "up"
    assert redis.get(deployment_marker(str(ours))) == str(ours).encode()  # put back
