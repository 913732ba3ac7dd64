"""Out-of-memory remediation on a real stack: a host MemoryError at a chosen step, then half
the micro-batch, twice the accumulation, the same global batch, and the curve going on."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.health.receiver import RECEIVER_ENV, Receiver
from tests.stack import RunningStack, trainboard_up, wait_for
from workers.contract.oom import TEST_OOM_VARIABLE

pytestmark = pytest.mark.slow

STEPS, OOM_AT = 60, 35
SPEC: dict[str, Any] = {
    "name": "oom-then-smaller",
    "template": "mlp",
    "parallelism": {"strategy": "data", "devices": 2},
    "hyperparameters": {"steps": STEPS, "batch_size": 32, "lr": 0.003},
    "checkpoint": {"every_steps": 10},
    "health": {"on_oom": "reduce_microbatch", "max_oom_reductions": 2},
    # the engine's test hook: a MemoryError when step 35 starts with a micro-batch above 16
    "env": {TEST_OOM_VARIABLE: f"{OOM_AT}:16"},
}


def _get(stack: RunningStack, path: str, **params: Any) -> Any:
    with stack.client() as client:
        response = client.get(path, params=params)
        assert response.status_code == 200, response.text
        return response.json()


def _ended(stack: RunningStack, job_id: int) -> dict[str, Any] | None:
    job: dict[str, Any] = _get(stack, f"/api/jobs/{job_id}")
    return job if job["state"] in ("succeeded", "failed", "cancelled") else None


def test_a_host_oom_restarts_with_half_the_micro_batch_and_the_curve_continues(
    tmp_path: Path,
) -> None:
    receiver = Receiver()
    receiver.start()
    with trainboard_up(tmp_path, cpu_slots=2, extra_env=RECEIVER_ENV) as stack:
        with stack.client() as client:
            hook = {"url": receiver.url, "events": ["oom_remediation", "succeeded"]}
            assert client.post("/api/webhooks", json=hook).status_code == 201
            job_id = client.post("/api/jobs", json=SPEC).json()["id"]
            # the same run without the injected failure: what the curve should be
            plain = {k: v for k, v in SPEC.items() if k not in ("env", "health")}
            reference_id = client.post("/api/jobs", json=plain).json()["id"]
        for one in (job_id, reference_id):
            job = wait_for(partial(_ended, stack, one), timeout=300, what=f"job {one} to end")
            assert job["state"] == "succeeded", job["reason"]
        job = _get(stack, f"/api/jobs/{job_id}")
        assert job["restarts"] == 0  # a remediation spends none of max_restarts

        first, second = sorted(
            _get(stack, f"/api/jobs/{job_id}/attempts"), key=lambda a: a["number"]
        )
        assert first["exit_reason"].startswith(
            f"out of memory: host MemoryError at step {OOM_AT} on rank "
        )
        assert "with micro-batch 32 x accumulation 1 (global batch 64)" in first["exit_reason"]
        [event] = [
            e for e in _get(stack, f"/api/jobs/{job_id}/events") if e["kind"] == "oom_remediation"
        ]
        assert (
            "micro-batch 16 (was 32) x accumulation 2 (was 1), global batch 64 kept"
            in (event["message"])
        )

        # the second attempt's rank 0 says what it resumed with (its log file on the node)
        log = tmp_path / "data" / "logs" / f"job-{job_id}" / "attempt-2" / "rank-0.stdout.log"
        said = log.read_text().splitlines()[0]
        assert said.startswith("resumed from ") and said.endswith(
            "at step 30 (global batch 64 = 16 x 2 accumulation x 2 replicas)"
        )

        loss = _get(stack, f"/api/jobs/{job_id}/metrics/loss")
        assert loss["step"] == list(range(1, STEPS + 1))  # every step once
        # the same samples in each global batch, split in two: the curve goes on as the
        # uninterrupted run's (float rounding of the split sums aside), before and after
        reference = _get(stack, f"/api/jobs/{reference_id}/metrics/loss")
        assert reference["step"] == loss["step"]
        assert loss["value"] == pytest.approx(reference["value"], rel=1e-3)
        assert loss["value"][-1] < loss["value"][0]  # and it trained

        def events_of_the_job() -> list[str]:  # the reference job's success comes too
            posts = [(p["headers"], json.loads(p["body"])) for p in receiver.received]
            found = [h["X-Trainboard-Event"] for h, b in posts if b["job"]["id"] == job_id]
            return found if len(found) >= 2 else []

        events = wait_for(events_of_the_job, timeout=30, what="the job's two webhooks")
        assert events == ["oom_remediation", "succeeded"]
    receiver.server.shutdown()
