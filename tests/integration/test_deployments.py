"""Two deployments on one Redis never read each other's control state or telemetry (#19)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from tests.stack import RunningStack, private_redis, trainboard_up

pytestmark = pytest.mark.slow

SPEC = {
    "name": "dp",
    "template": "mlp",
    "parallelism": {"strategy": "data", "devices": 1},
    "hyperparameters": {"steps": 60, "batch_size": 16},
}


def run_job(stack: RunningStack) -> dict[str, object]:
    with stack.client() as client:
        job_id = client.post("/api/jobs", json=SPEC).json()["id"]
        job = stack.wait_job(client, job_id, "succeeded", "failed", "cancelled", timeout=180)
        job["loss_steps"] = client.get(f"/api/jobs/{job_id}/metrics/loss").json()["step"]
        return dict(job)


def test_a_new_deployment_on_a_used_redis_works_untouched_by_the_old_ones_keys(
    tmp_path: Path,
) -> None:
    with private_redis(tmp_path) as url:
        shared = redis.Redis.from_url(url)
        with trainboard_up(tmp_path / "a", url, cpu_slots=1, flush=False) as first:
            assert run_job(first)["state"] == "succeeded"
        # what an old deployment leaves: stop requests for the first attempt ids, points
        for attempt in range(1, 6):
            shared.set(f"tb:control:{attempt}", "cancel")
        before = set(shared.keys("tb:*"))
        assert any(b":metrics" in key for key in before)  # the first one's telemetry is there
        with trainboard_up(tmp_path / "b", url, cpu_slots=1, flush=False) as second:
            job = run_job(second)  # attempt 1 of a fresh database, like the first one's
            assert job["state"] == "succeeded", job["reason"]
            assert job["loss_steps"] == list(range(1, 61))  # its own points, each once
            # the two deployments' keys are disjoint: each name carries its deployment id
            names = {k.decode() for k in shared.keys("tb:*")}
            prefixes = {n.split(":")[1] for n in names if n.count(":") >= 2}
            assert len([p for p in prefixes if len(p) == 32]) == 2
        shared.close()
