"""A gang no registered node could ever hold is refused at submission, unless it may wait."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from backend.scheduler.loop import Scheduler
from tests.backend.conftest import bearer
from tests.backend.test_jobs_api import GOOD_SPEC


def spec(devices: int, nodes: int = 1) -> dict[str, Any]:
    return {**GOOD_SPEC, "parallelism": {"strategy": "data", "devices": devices, "nodes": nodes}}


@pytest.mark.usefixtures("node_n1")
def test_a_job_larger_than_every_node_is_refused_naming_the_largest(
    api: TestClient,
    tokens: dict[str, str],
) -> None:
    alice = bearer(tokens["alice"])
    answer = api.post("/api/jobs", json=spec(5), headers=alice)
    assert answer.status_code == 422
    error = answer.json()["detail"][0]
    assert error["loc"] == ["body", "parallelism", "devices"]
    assert "the largest node, n1, has 4" in error["msg"]
    assert "wait_for_capacity: true" in error["msg"]
    two_nodes = api.post("/api/jobs", json=spec(4, nodes=2), headers=alice)
    assert two_nodes.status_code == 422
    assert "needs 2 nodes with 2 devices each" in two_nodes.json()["detail"][0]["msg"]
    assert "only 1 registered node" in two_nodes.json()["detail"][0]["msg"]
    assert api.post("/api/jobs", json=spec(4), headers=alice).status_code == 201


@pytest.mark.usefixtures("node_n1")
def test_a_job_that_may_wait_is_queued_with_its_wait_reason(
    api: TestClient,
    tokens: dict[str, str],
    scheduler: Scheduler,
) -> None:
    alice = bearer(tokens["alice"])
    body = {**spec(5), "wait_for_capacity": True}
    job = api.post("/api/jobs", json=body, headers=alice)
    assert job.status_code == 201, job.text
    assert scheduler.tick() == []
    waiting = api.get(f"/api/jobs/{job.json()['id']}", headers=alice).json()
    assert waiting["state"] == "queued"
    assert waiting["wait_reason"].startswith("no cluster capacity: needs 1 node(s) with 5")


@pytest.mark.usefixtures("node_n1")
def test_a_resume_on_more_devices_than_any_node_has_is_refused(
    api: TestClient,
    tokens: dict[str, str],
) -> None:
    alice = bearer(tokens["alice"])
    job = api.post("/api/jobs", json=spec(2), headers=alice).json()
    assert api.post(f"/api/jobs/{job['id']}/pause", headers=alice).status_code == 200
    answer = api.post(f"/api/jobs/{job['id']}/resume", json={"devices": 8}, headers=alice)
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["body", "parallelism", "devices"]


def test_before_any_node_registers_nothing_is_refused(
    api: TestClient, tokens: dict[str, str]
) -> None:
    answer = api.post("/api/jobs", json=spec(64), headers=bearer(tokens["alice"]))
    assert answer.status_code == 201
