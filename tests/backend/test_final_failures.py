"""A failure no restart can fix (a refused checkpoint) fails the job at once, spending nothing."""

from __future__ import annotations

from fastapi.testclient import TestClient

from backend.scheduler.loop import Scheduler
from tests.backend.conftest import bearer
from tests.backend.test_job_control import _running_job
from workers.contract.rank_env import EXIT_EXPLAINED, EXIT_FINAL

REASON = (
    "checkpoint refused: the checkpoint's .metadata is a pickle that names os.system, "
    "not one of DCP's metadata types"
)


def _finish(api: TestClient, tokens: dict[str, str], attempt: int, codes: list[int]) -> str:
    outcome = {"outcome": "failed", "node": "n1", "reason": REASON, "exit_codes": codes}
    done = api.post(f"/api/attempts/{attempt}/finish", json=outcome, headers=bearer(tokens["node"]))
    assert done.status_code == 200, done.text
    return str(done.json()["state"])


def test_a_rank_that_exits_final_fails_the_job_at_once_with_the_reason(
    api: TestClient, tokens: dict[str, str], node_n1: str, scheduler: Scheduler
) -> None:
    job_id, attempt = _running_job(api, tokens, scheduler)
    # rank 0 refused the checkpoint; the supervisor then stopped rank 1 (SIGTERM)
    assert _finish(api, tokens, attempt, [EXIT_FINAL, -15]) == "failed"

    alice = bearer(tokens["alice"])
    job = api.get(f"/api/jobs/{job_id}", headers=alice).json()
    assert (job["state"], job["reason"], job["restarts"]) == ("failed", REASON, 0)
    (only,) = api.get(f"/api/jobs/{job_id}/attempts", headers=alice).json()
    assert (only["state"], only["exit_reason"]) == ("failed", REASON)
    scheduler.tick()
    assert len(api.get(f"/api/jobs/{job_id}/attempts", headers=alice).json()) == 1


def test_an_explained_failure_still_restarts_and_counts(
    api: TestClient, tokens: dict[str, str], node_n1: str, scheduler: Scheduler
) -> None:
    job_id, attempt = _running_job(api, tokens, scheduler)
    assert _finish(api, tokens, attempt, [EXIT_EXPLAINED, -15]) == "restarting"
    job = api.get(f"/api/jobs/{job_id}", headers=bearer(tokens["alice"])).json()
    assert (job["state"], job["restarts"]) == ("restarting", 1)
