"""Preemption with checkpoint on a real stack: an urgent job takes a full cluster's devices.

Two 2-slot low-priority jobs fill a 4-slot node; a 4-slot high-priority job arrives. Both
victims save a final checkpoint and go back to the queue, the urgent job runs, then the
victims resume from those checkpoints and finish with every step present exactly once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.stack import RunningStack, trainboard_up, wait_for

pytestmark = pytest.mark.slow

STEPS = 3000


def _spec(name: str, devices: int, priority: str, steps: int) -> dict[str, Any]:
    return {
        "name": name,
        "template": "mlp",
        "priority": priority,
        "parallelism": {"strategy": "data", "devices": devices},
        "hyperparameters": {"steps": steps, "batch_size": 16},
        "checkpoint": {"every_steps": 1000},  # only the final one, on preemption, counts
    }


def _get(client: httpx.Client, path: str) -> Any:
    response = client.get(path)
    assert response.status_code == 200, f"{path}: {response.status_code} {response.text}"
    return response.json()


def _state(client: httpx.Client, job_id: int, *states: str, timeout: float) -> dict[str, Any]:
    return dict(
        wait_for(
            lambda: (job := _get(client, f"/api/jobs/{job_id}"))["state"] in states and job,
            timeout=timeout,
            what=f"job {job_id} to become {' or '.join(states)}",
        )
    )


def _duplicates_and_steps(stack: RunningStack, job_id: int) -> tuple[list[Any], list[Any]]:
    engine = sa.create_engine(stack.database_url)
    with engine.connect() as conn:
        points = "FROM metric_points p JOIN attempts a ON a.id = p.attempt_id WHERE a.job_id = :j"
        twice = conn.execute(
            sa.text(
                f"SELECT p.step, p.rank, p.name, count(*) {points} "
                "GROUP BY p.step, p.rank, p.name HAVING count(*) > 1"
            ),
            {"j": job_id},
        ).all()
        steps = conn.execute(
            sa.text(
                f"SELECT p.rank, count(DISTINCT p.step), min(p.step), max(p.step) {points} "
                "AND p.name = 'loss' GROUP BY p.rank ORDER BY p.rank"
            ),
            {"j": job_id},
        ).all()
    engine.dispose()
    return list(twice), list(steps)


def test_an_urgent_job_preempts_two_checkpointed_victims_which_resume_and_finish_once(
    tmp_path: Path,
) -> None:
    env = {"TRAINBOARD_MIN_RUN_SECONDS": "0", "TRAINBOARD_PREEMPT_GRACE_SECONDS": "60"}
    with trainboard_up(tmp_path, cpu_slots=4, extra_env=env) as stack, stack.client() as client:
        victims = [
            client.post("/api/jobs", json=_spec(f"low-{i}", 2, "low", STEPS)).json()["id"]
            for i in range(2)
        ]
        wait_for(
            lambda: all(_get(client, f"/api/jobs/{j}")["step"] >= 100 for j in victims),
            timeout=240,
            what="both victims to train 100 steps",
        )
        urgent = client.post("/api/jobs", json=_spec("urgent", 4, "high", 150)).json()["id"]
        for job_id in victims:
            requeued = _state(client, job_id, "queued", timeout=120)
            assert requeued["reason"] == f"preempted by job {urgent}"
        running = _state(client, urgent, "running", "succeeded", timeout=120)
        assert len(running["devices"]) == 4
        # the board's and `trainboard ls`'s view of the victims while the urgent job runs
        waiting = wait_for(
            lambda: all(
                (j := _get(client, f"/api/jobs/{v}"))["queue_position"]
                and (j["wait_reason"] or "").startswith(f"preempted by job {urgent}; ")
                for v in victims
            ),
            timeout=30,
            what="the victims' queue places and reasons",
        )
        assert waiting
        listed = stack.cli("ls", "--state", "queued").stdout
        lines = {int(line.split()[0]): line for line in listed.splitlines()[1:]}
        for place, job_id in enumerate(sorted(victims), start=1):  # by submission
            assert f"[#{place} in queue: preempted by job {urgent}; " in lines[job_id], listed
        assert _state(client, urgent, "succeeded", "failed", timeout=300)["state"] == "succeeded"
        for job_id in victims:
            done = _state(client, job_id, "succeeded", "failed", timeout=600)
            assert done["state"] == "succeeded", done["reason"]
            assert done["restarts"] == 0  # a preemption spends no restart
            first, second = _get(client, f"/api/jobs/{job_id}/attempts")
            assert first["state"] == "stopped" and first["last_checkpoint"]
            assert second["resume_from"] == first["last_checkpoint"]
            twice, steps = _duplicates_and_steps(stack, job_id)
            assert twice == []  # one point per step, rank and name
            assert steps == [(0, STEPS, 1, STEPS), (1, STEPS, 1, STEPS)]
            events = _get(client, f"/api/jobs/{job_id}/events")
            preempted = [e for e in events if e["kind"] == "preempted"]
            assert len(preempted) == 1 and f"preempted by job {urgent}" in preempted[0]["message"]
            assert any("not counted as a restart" in e["message"] for e in events)
        told = [e["message"] for e in _get(client, f"/api/jobs/{urgent}/events")]
        for job_id in victims:
            assert any(m.startswith(f"preempting job {job_id} ") for m in told), told
        usage = _get(client, "/api/usage?by=job")
        by_job = {row["key"]: row for row in usage["rows"]}
        assert set(by_job) == {str(j) for j in [*victims, urgent]}
        assert all(row["allocated_device_seconds"] > 0 for row in by_job.values())
        assert by_job[str(victims[0])]["attempts"] == 2
        printed = stack.cli("usage", "--by", "job")
        assert printed.returncode == 0 and f"\n{urgent} " in printed.stdout, printed
