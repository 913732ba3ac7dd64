"""Heartbeats carry the machine's CPU and memory: stored on the node, sent live on `cluster`."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from backend.deployment_keys import keys_of
from backend.telemetry.live.feed import LIVE_STREAM
from tests.backend.conftest import NODE_INSTANCE, bearer
from workers.devices.host import host_stats


def node_view(api: TestClient, tokens: dict[str, str]) -> dict[str, object]:
    (node,) = api.get("/api/nodes", headers=bearer(tokens["alice"])).json()["nodes"]
    assert isinstance(node, dict)
    return node


def test_a_heartbeat_with_host_stats_shows_on_the_node_and_goes_live(
    api: TestClient, tokens: dict[str, str], node_headers: dict[str, str]
) -> None:
    assert node_view(api, tokens)["host"] is None  # registered, no heartbeat yet
    host_stats()  # psutil's CPU % counts from the previous call
    stats = host_stats()
    body = {"instance": NODE_INSTANCE, "host": stats.model_dump()}
    assert api.post("/api/nodes/n1/heartbeat", json=body, headers=node_headers).json() == {
        "drained": False,
        "stop": [],
        "reregister": False,
        "lease_seconds": api.app.state.settings.heartbeat_timeout,  # type: ignore[attr-defined]
    }
    shown = node_view(api, tokens)["host"]
    assert shown == stats.model_dump()
    assert 0 < stats.memory_used < stats.memory_total and stats.cpus >= 1
    redis = api.app.state.redis  # type: ignore[attr-defined]
    ((_, fields),) = redis.xrevrange(keys_of(redis).name(LIVE_STREAM), count=1)
    assert fields[b"t"] == b"cluster"
    (update,) = json.loads(fields[b"d"])["hosts"]
    assert update["node"] == "n1" and update["cpu_percent"] == stats.cpu_percent
    # an agent that sends no stats (older ones) keeps the last ones shown
    beat = {"instance": NODE_INSTANCE}
    assert api.post("/api/nodes/n1/heartbeat", json=beat, headers=node_headers).is_success
    assert node_view(api, tokens)["host"] == stats.model_dump()


@pytest.mark.parametrize(
    ("field", "value"),
    [("cpu_percent", 100.5), ("cpu_percent", -1), ("cpus", 0), ("memory_used", -5)],
)
def test_impossible_host_stats_are_refused_naming_the_field(
    api: TestClient, node_headers: dict[str, str], field: str, value: float
) -> None:
    host = {"cpu_percent": 5.0, "cpus": 2, "memory_used": 1, "memory_total": 2, field: value}
    body = {"instance": NODE_INSTANCE, "host": host}
    answer = api.post("/api/nodes/n1/heartbeat", json=body, headers=node_headers)
    assert answer.status_code == 422
    assert field in json.dumps(answer.json())
