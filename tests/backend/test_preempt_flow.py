"""Preemption through the API and a real scheduler: victims take the pause path, then queue."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from backend.scheduler.loop import Scheduler
from tests.backend.conftest import bearer
from tests.backend.test_jobs_api import GOOD_SPEC, queued_orders

pytestmark = pytest.mark.usefixtures("node_n1")


def _spec(priority: str, devices: int, **extra: Any) -> dict[str, Any]:
    parallelism = {"strategy": "data", "devices": devices}
    return GOOD_SPEC | {"priority": priority, "parallelism": parallelism, **extra}


def _start(
    api: TestClient, tokens: dict[str, str], passes: Scheduler, spec: dict[str, Any]
) -> tuple[int, int]:
    job = api.post("/api/jobs", json=spec, headers=bearer(tokens["alice"])).json()
    passes.tick()
    order = queued_orders(api.app.state.redis, "n1")[-1]  # type: ignore[attr-defined]
    assert order["job_id"] == job["id"]
    claim = api.post(
        f"/api/attempts/{order['attempt_id']}/claim",
        json={"node": "n1"},
        headers=bearer(tokens["node"]),
    )
    assert claim.status_code == 200, claim.text
    return job["id"], order["attempt_id"]


def test_victims_checkpoint_requeue_at_their_place_and_resume_without_spending_restarts(
    api: TestClient,
    tokens: dict[str, str],
    scheduler: Scheduler,
) -> None:
    alice, node = bearer(tokens["alice"]), bearer(tokens["node"])
    (low1, attempt1), (low2, attempt2) = (
        _start(api, tokens, scheduler, _spec("low", 2)) for _ in range(2)
    )
    urgent = api.post("/api/jobs", json=_spec("high", 4), headers=alice).json()["id"]
    scheduler.tick()
    waiting = api.get(f"/api/jobs/{urgent}", headers=alice).json()
    assert waiting["wait_reason"] == (
        f"preempting lower-priority jobs {low1}, {low2} for 4 devices (they checkpoint first)"
    )
    redis = api.app.state.redis  # type: ignore[attr-defined]
    for job_id, attempt in ((low1, attempt1), (low2, attempt2)):
        victim = api.get(f"/api/jobs/{job_id}", headers=alice).json()
        assert victim["state"] == "pausing"
        assert redis.get(scheduler.keys.control(attempt)) == b"preempt"
        events = api.get(f"/api/jobs/{job_id}/events", headers=alice).json()
        assert events[-1]["kind"] == "preempted"
        assert events[-1]["message"].startswith(f"preempted by job {urgent} (high priority")
    told = [e["message"] for e in api.get(f"/api/jobs/{urgent}/events", headers=alice).json()]
    assert [m.split(" (")[0] for m in told if m.startswith("preempting")] == [
        f"preempting job {low2}",  # the youngest attempt first
        f"preempting job {low1}",
    ]
    scheduler.tick()  # nothing new: the victims are still stopping, no second choice
    assert len([m for m in told if m.startswith("preempting")]) == 2
    for job_id, attempt in ((low1, attempt1), (low2, attempt2)):
        outcome = {
            "outcome": "stopped",
            "node": "n1",
            "reason": "stopped on preempt request",
            "last_checkpoint": f"/runs/job-{job_id}/checkpoints/attempt-1/step-70",
        }
        answer = api.post(f"/api/attempts/{attempt}/finish", json=outcome, headers=node)
        assert answer.json() == {"state": "queued"}
    scheduler.tick()
    assert api.get(f"/api/jobs/{urgent}", headers=alice).json()["state"] == "scheduled"
    behind = "waiting behind jobs of higher priority or earlier submission"
    for place, job_id, why in ((1, low1, "waiting for 2 free devices"), (2, low2, behind)):
        victim = api.get(f"/api/jobs/{job_id}", headers=alice).json()
        assert victim["state"] == "queued" and victim["restarts"] == 0
        assert victim["reason"] == f"preempted by job {urgent}"
        assert victim["wait_reason"] == f"preempted by job {urgent}; {why}"
        assert victim["queue_position"] == place  # their submission order, kept
    # the urgent job ends; the victims resume from the checkpoints they saved
    urgent_attempt = queued_orders(redis, "n1")[-1]["attempt_id"]
    api.post(f"/api/attempts/{urgent_attempt}/claim", json={"node": "n1"}, headers=node)
    done = {"outcome": "succeeded", "node": "n1"}
    api.post(f"/api/attempts/{urgent_attempt}/finish", json=done, headers=node)
    scheduler.tick()
    resumed = {o["job_id"]: o for o in queued_orders(redis, "n1")[-2:]}
    for job_id in (low1, low2):
        assert resumed[job_id]["number"] == 2
        assert resumed[job_id]["resume_from"] == f"/runs/job-{job_id}/checkpoints/attempt-1/step-70"


def test_no_victim_that_is_not_preemptible_or_was_preempted_a_moment_ago(
    api: TestClient,
    tokens: dict[str, str],
    scheduler: Scheduler,
) -> None:
    alice, node = bearer(tokens["alice"]), bearer(tokens["node"])
    keep, _ = _start(api, tokens, scheduler, _spec("low", 2, preemptible=False))
    once, attempt = _start(api, tokens, scheduler, _spec("low", 2))
    first = api.post("/api/jobs", json=_spec("high", 2), headers=alice).json()["id"]
    scheduler.tick()
    assert api.get(f"/api/jobs/{keep}", headers=alice).json()["state"] == "running"
    assert api.get(f"/api/jobs/{once}", headers=alice).json()["state"] == "pausing"
    stopped = {"outcome": "stopped", "node": "n1", "reason": "stopped on preempt request"}
    api.post(f"/api/attempts/{attempt}/finish", json=stopped, headers=node)
    scheduler.tick()  # the high job takes the freed devices
    api.post(f"/api/jobs/{first}/cancel", headers=alice)
    scheduler.tick()  # the victim runs again
    order = queued_orders(api.app.state.redis, "n1")[-1]  # type: ignore[attr-defined]
    assert order["job_id"] == once
    api.post(f"/api/attempts/{order['attempt_id']}/claim", json={"node": "n1"}, headers=node)
    second = api.post("/api/jobs", json=_spec("high", 2), headers=alice).json()["id"]
    scheduler.tick()  # preempted moments ago (< 300 s): no victim; the other one may not be
    assert api.get(f"/api/jobs/{once}", headers=alice).json()["state"] == "running"
    assert api.get(f"/api/jobs/{keep}", headers=alice).json()["state"] == "running"
    assert api.get(f"/api/jobs/{second}", headers=alice).json()["wait_reason"] == (
        "waiting for 2 free devices"
    )
