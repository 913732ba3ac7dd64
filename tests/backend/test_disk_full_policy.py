"""`checkpoint.on_disk_full: pause`: checked at submit; a pausing report pauses, spends nothing."""

from __future__ import annotations

from fastapi.testclient import TestClient

from backend.scheduler.loop import Scheduler
from tests.backend.conftest import bearer
from tests.backend.test_job_control import _running_job
from tests.backend.test_jobs_api import GOOD_SPEC, queued_orders

REASON = (
    "no space left on node n1 (3 MiB free): checkpoint step 20 not saved; paused at the last "
    "checkpoint (checkpoint.on_disk_full: pause)"
)


def test_an_unknown_disk_full_policy_is_refused_naming_the_field(
    api: TestClient, tokens: dict[str, str]
) -> None:
    spec = {**GOOD_SPEC, "checkpoint": {"every_steps": 10, "on_disk_full": "panic"}}
    refused = api.post("/api/jobs", json=spec, headers=bearer(tokens["alice"]))
    assert refused.status_code == 422
    assert "on_disk_full" in refused.text and "'continue' or 'pause'" in refused.text


def test_ranks_that_pause_on_a_full_disk_leave_the_job_paused_resumable_and_its_restarts_unspent(
    api: TestClient, tokens: dict[str, str], node_n1: str, scheduler: Scheduler
) -> None:
    alice, node = bearer(tokens["alice"]), bearer(tokens["node"])
    job_id, attempt = _running_job(api, tokens, scheduler)
    outcome = {
        "outcome": "stopped",
        "node": "n1",
        "pause": True,
        "reason": REASON,
        "exit_codes": [5],
        "last_checkpoint": "/runs/job-1/checkpoints/step-10",
    }
    finished = api.post(f"/api/attempts/{attempt}/finish", json=outcome, headers=node)
    assert finished.json() == {"state": "paused"}

    job = api.get(f"/api/jobs/{job_id}", headers=alice).json()
    assert (job["state"], job["reason"], job["restarts"]) == ("paused", REASON, 0)
    assert "resume" in job["actions"]
    (attempt_view,) = api.get(f"/api/jobs/{job_id}/attempts", headers=alice).json()
    assert (attempt_view["state"], attempt_view["exit_reason"]) == ("stopped", REASON)
    assert api.post(f"/api/jobs/{job_id}/resume", headers=alice).json()["state"] == "queued"
    scheduler.tick()
    order = queued_orders(api.app.state.redis, "n1")[-1]  # type: ignore[attr-defined]
    assert (order["number"], order["resume_from"]) == (2, "/runs/job-1/checkpoints/step-10")


def test_a_stopped_report_without_pause_is_still_a_failure_to_restart(
    api: TestClient, tokens: dict[str, str], node_n1: str, scheduler: Scheduler
) -> None:
    job_id, attempt = _running_job(api, tokens, scheduler)
    outcome = {"outcome": "stopped", "node": "n1", "reason": "ranks stopped"}
    api.post(f"/api/attempts/{attempt}/finish", json=outcome, headers=bearer(tokens["node"]))
    job = api.get(f"/api/jobs/{job_id}", headers=bearer(tokens["alice"])).json()
    assert job["state"] == "restarting" and job["restarts"] == 1
