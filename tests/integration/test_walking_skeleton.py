"""The walking skeleton on the real stack: `trainboard up`, Celery, Redis, 2 real DDP ranks."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import sqlalchemy as sa

from tests.backend.test_jobs_api import GOOD_SPEC
from tests.integration.cluster import rank_processes
from tests.stack import RunningStack, wait_for

pytestmark = pytest.mark.slow

PER_STEP_METRICS = ("loss", "lr", "step_time", "samples_per_s")
CONTRACT_SPEC = GOOD_SPEC  # the API tests' spec, run for real here


def _job(stack: RunningStack, job_id: int) -> dict[str, Any]:
    with stack.client() as client:
        return dict(client.get(f"/api/jobs/{job_id}").json())


def _wait_state(
    stack: RunningStack, job_id: int, states: set[str], timeout: float
) -> dict[str, Any]:
    return dict(
        wait_for(
            lambda: (job := _job(stack, job_id))["state"] in states and job,
            timeout=timeout,
            what=f"job {job_id} to reach {sorted(states)}",
        )
    )


def test_two_rank_ddp_job_succeeds_with_one_point_per_attempt_step_rank_name(
    stack: RunningStack,
) -> None:
    with stack.client() as client:
        created = client.post("/api/jobs", json=CONTRACT_SPEC)
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    job = _wait_state(stack, job_id, {"succeeded", "failed"}, timeout=180)
    assert job["state"] == "succeeded", job["reason"]
    assert job["devices"] == [0, 1] or len(job["devices"]) == 2

    engine = sa.create_engine(stack.database_url)
    expected_steps = set(range(1, 201))

    def all_points_ingested() -> bool:
        with engine.connect() as conn:
            count = conn.execute(
                sa.text(
                    "SELECT count(*) FROM metric_points m JOIN attempts a ON a.id = m.attempt_id "
                    "WHERE a.job_id = :job AND m.name = 'loss'"
                ),
                {"job": job_id},
            ).scalar_one()
        return count >= 2 * len(expected_steps)

    wait_for(all_points_ingested, timeout=30, what="every loss point to be ingested")
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT m.attempt_id, m.step, m.rank, m.name, count(*) FROM metric_points m "
                "JOIN attempts a ON a.id = m.attempt_id WHERE a.job_id = :job "
                "GROUP BY m.attempt_id, m.step, m.rank, m.name"
            ),
            {"job": job_id},
        ).all()
    engine.dispose()
    assert rows and all(count == 1 for *_, count in rows), "a metric point was stored twice"
    names = {name for _, _, _, name, _ in rows}
    assert {"loss", "lr", "grad_norm", "peak_mem"} <= names
    for name in PER_STEP_METRICS:  # peak_mem and others are sampled at report steps only
        for rank in (0, 1):
            steps = {step for _, step, r, n, _ in rows if n == name and r == rank}
            assert steps == expected_steps, (
                f"{name} rank {rank} has gaps: {sorted(expected_steps - steps)[:10]}"
            )
    for rank in (0, 1):  # without grad_clip the norm is taken every 10 steps
        steps = {step for _, step, r, n, _ in rows if n == "grad_norm" and r == rank}
        assert steps == set(range(10, 201, 10))

    with stack.client() as client:
        loss = client.get(f"/api/jobs/{job_id}/metrics/loss").json()
        events = [e["kind"] for e in client.get(f"/api/jobs/{job_id}/events").json()]
    assert loss["step"] == sorted(expected_steps)
    first, last = loss["value"][:20], loss["value"][-20:]
    assert sum(last) / len(last) < 0.7 * sum(first) / len(first), "the loss did not fall"
    assert events[:3] == ["submitted", "scheduled", "running"] and events[-1] == "succeeded"
    assert events.count("checkpoint") == 4


def test_cancelling_a_running_job_leaves_no_rank_process(stack: RunningStack) -> None:
    spec = {
        **CONTRACT_SPEC,
        "name": "long",
        "hyperparameters": {"steps": 1_000_000, "batch_size": 32},
    }
    with stack.client() as client:
        job_id = client.post("/api/jobs", json=spec).json()["id"]
    wait_for(
        lambda: _job(stack, job_id)["step"] >= 5, timeout=120, what="the job to train a few steps"
    )
    ranks = rank_processes(job_id, stack.data_dir)
    assert len(ranks) == 2
    started = time.monotonic()
    with stack.client() as client:
        assert client.post(f"/api/jobs/{job_id}/cancel").json()["state"] == "cancelling"
    job = _wait_state(stack, job_id, {"cancelled", "failed"}, timeout=30)
    assert job["state"] == "cancelled"
    wait_for(
        lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in ranks),
        timeout=5,
        what="the rank processes to exit",
    )
    assert time.monotonic() - started < 5 + 5  # grace (5 s in the stack) + 5 s
    checkpoints = sorted((stack.data_dir / "runs" / f"job-{job_id}" / "checkpoints").iterdir())
    assert checkpoints, "cancel did not leave a final checkpoint"


def test_cli_submit_ls_cancel(stack: RunningStack, tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(
        "name: from-cli\ntemplate: mlp\nparallelism: {strategy: data, devices: 1}\n"
        "hyperparameters: {steps: 100000}\n"
    )
    submitted = stack.cli("submit", str(spec_file))
    assert submitted.returncode == 0, submitted.stderr
    job_id = int(submitted.stdout.split()[1])
    listing = stack.cli("ls")
    assert listing.returncode == 0 and "from-cli" in listing.stdout
    cancelled = stack.cli("cancel", str(job_id))
    assert cancelled.returncode == 0 and f"job {job_id}" in cancelled.stdout
    _wait_state(stack, job_id, {"cancelled"}, timeout=30)


def test_cli_refuses_bad_input_clearly(stack: RunningStack, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntemplate: mlp\nparallelism: {devices: 0}\n")
    result = stack.cli("submit", str(bad))
    assert result.returncode == 2 and "parallelism.devices" in result.stderr
    assert "cannot read" in stack.cli("submit", str(tmp_path / "missing.yaml")).stderr
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    assert "must hold a mapping" in stack.cli("submit", str(tmp_path / "list.yaml")).stderr
    (tmp_path / "broken.yaml").write_text("name: [unclosed\n")
    assert "not valid YAML" in stack.cli("submit", str(tmp_path / "broken.yaml")).stderr
    assert stack.cli("cancel", "999999").returncode == 2
