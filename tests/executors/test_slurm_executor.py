"""Trainboard on Slurm end to end: `trainboard up --executor slurm` on a real one-host Slurm.

Jobs go in through the REST API; each attempt becomes one `sbatch` whose `srun` starts the
supervisor (workers/node/slurm_step.py), which claims, runs the ranks and reports through
the node routes as a worker node's would.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import httpx
import psutil
import sqlalchemy as sa

from tests.executors.conftest import SLURM_TESTS
from tests.executors.slurm_stack import SlurmStack
from tests.slurm_cluster import SlurmCluster
from tests.stack import wait_for

pytestmark = SLURM_TESTS


def _spec(name: str, *, devices: int = 1, steps: int = 20, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "template": "mlp",
        "parallelism": {"strategy": "data", "devices": devices},
        "hyperparameters": {"steps": steps, "batch_size": 16, **extra},
    }


def _attempts(client: httpx.Client, job_id: int) -> list[dict[str, Any]]:
    return list(client.get(f"/api/jobs/{job_id}/attempts").json())


def _processes_of(folder: Path) -> list[psutil.Process]:
    """Processes started for an attempt: its step (folder in its command line) and ranks
    (working in the job's run dir)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        with contextlib.suppress(psutil.Error):
            if (
                proc.info["cwd"]
                and proc.info["cwd"].startswith(str(folder))
                or any(str(folder) in part for part in proc.info["cmdline"] or ())
            ):
                found.append(proc)
    return found


def test_a_job_runs_through_sbatch_and_srun_to_succeeded(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    with stack.client() as client:
        job_id = client.post("/api/jobs", json=_spec("on-slurm")).json()["id"]
        job = stack.wait_job(client, job_id, "succeeded", "failed", "restarting", timeout=240)
        assert job["state"] == "succeeded", (job["reason"], stack.log_path.read_text()[-3000:])
        attempts = _attempts(client, job_id)
        loss = client.get(f"/api/jobs/{job_id}/metrics/loss").json()
    assert len(attempts) == 1
    slurm_id = attempts[0]["slurm_job_id"]
    assert slurm_id and slurm_id.isdigit()
    # the supervisor reported, then its srun step and the batch shell end
    record = wait_for(
        lambda: (j := cluster.cli.job(slurm_id)) and j.state not in ("RUNNING", "COMPLETING") and j,
        timeout=30,
        what=f"Slurm job {slurm_id} to end",
    )
    assert record.state == "COMPLETED" and record.exit_code == 0, record
    assert record.name.startswith("tb-") and record.name.endswith(f"-{job_id}-{attempts[0]['id']}")
    assert len(loss["step"]) >= 10 and loss["step"][-1] >= 19
    # its slot's device was sampled while it ran, attributed to the attempt's rank 0
    engine = sa.create_engine(stack.database_url)
    with engine.connect() as db:
        sampled = db.execute(
            sa.text(
                "SELECT node, device, rank FROM device_samples WHERE attempt_id = :a"
                " GROUP BY node, device, rank"
            ),
            {"a": attempts[0]["id"]},
        ).all()
    engine.dispose()
    assert [tuple(row) for row in sampled] == [("slurm-0", 0, 0)]


def test_a_job_behind_another_shows_slurms_reason_and_cancel_leaves_nothing(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    with stack.client() as client:
        # both CPUs for a long while, then a second job that needs them too
        first = client.post("/api/jobs", json=_spec("holds-both", devices=2, steps=100_000))
        assert first.status_code == 201, first.text
        first_id = first.json()["id"]
        stack.wait_job(client, first_id, "running", timeout=120)
        second = client.post("/api/jobs", json=_spec("waits", devices=2))
        assert second.status_code == 201, second.text
        second_id = second.json()["id"]
        waiting = wait_for(
            lambda: (
                (j := client.get(f"/api/jobs/{second_id}").json())["wait_reason"]
                and "Resources" in j["wait_reason"]
                and j
            ),
            timeout=60,
            what="the second job to show Slurm's reason",
        )
        slurm_id = wait_for(
            lambda: _attempts(client, second_id)[0]["slurm_job_id"],
            timeout=30,
            what="the second attempt's Slurm job id",
        )
        assert waiting["wait_reason"] == (
            f"Slurm job {slurm_id}: waiting for Slurm to free enough nodes/devices (Resources)"
        )
        assert cluster.cli.queue("tb-")[slurm_id].reason == "Resources"

        running = _attempts(client, first_id)[0]
        step_dir = stack.data_dir / "slurm" / f"attempt-{running['id']}"
        run_dir = stack.data_dir / "runs" / f"job-{first_id}"
        assert _processes_of(step_dir), "the first job's supervisor runs under Slurm"
        assert client.post(f"/api/jobs/{first_id}/cancel").status_code == 200
        job = stack.wait_job(client, first_id, "cancelled", "failed", timeout=60)
        assert job["state"] == "cancelled", job["reason"]
        # Slurm's KillWait (2 s) + 5 s: nothing of it is left, and Slurm has ended it
        wait_for(
            lambda: not _processes_of(step_dir) and not _processes_of(run_dir),
            timeout=cluster.kill_wait + 5,
            what="no process of the cancelled job left",
        )
        first_slurm = running["slurm_job_id"]
        wait_for(
            lambda: first_slurm not in cluster.cli.queue("tb-"),
            timeout=30,
            what="the cancelled job's Slurm job to end",
        )
        # the waiting one now gets the CPUs
        done = stack.wait_job(client, second_id, "succeeded", "failed", timeout=240)
        assert done["state"] == "succeeded", done["reason"]
        assert done["wait_reason"] is None


def test_a_supervisor_killed_under_slurm_ends_its_attempt_with_slurms_state(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    spec = {**_spec("killed", steps=100_000), "max_restarts": 0}
    with stack.client() as client:
        job_id = client.post("/api/jobs", json=spec).json()["id"]
        stack.wait_job(client, job_id, "running", timeout=120)
        attempt = _attempts(client, job_id)[0]
        step_dir = stack.data_dir / "slurm" / f"attempt-{attempt['id']}"
        steps = wait_for(
            lambda: [
                p for p in _processes_of(step_dir) if "workers.node.slurm_step" in p.cmdline()
            ],
            timeout=30,
            what="the attempt's supervisor",
        )
        for step in steps:
            step.kill()  # no report of how it ended reaches the API
        job = stack.wait_job(client, job_id, "failed", "succeeded", timeout=60)
        ended = _attempts(client, job_id)[0]
    assert job["state"] == "failed"
    slurm_id = attempt["slurm_job_id"]
    assert ended["state"] == "failed"
    assert ended["exit_reason"].startswith(
        f"Slurm job {slurm_id} ended without its supervisors' report: Slurm: FAILED"
    ), ended["exit_reason"]
    run_dir = stack.data_dir / "runs" / f"job-{job_id}"
    wait_for(
        lambda: not _processes_of(step_dir) and not _processes_of(run_dir),
        timeout=cluster.kill_wait + 5,
        what="no process of the job left",
    )


def test_pause_ends_the_slurm_job_and_resume_continues_at_the_checkpointed_step(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    spec = {**_spec("pausable", steps=100_000), "checkpoint": {"every_steps": 1000}}
    with stack.client() as client:
        job_id = client.post("/api/jobs", json=spec).json()["id"]
        wait_for(
            lambda: (client.get(f"/api/jobs/{job_id}").json()["step"] or 0) >= 30,
            timeout=120,
            what="some training",
        )
        assert client.post(f"/api/jobs/{job_id}/pause").status_code == 200
        paused = stack.wait_job(client, job_id, "paused", "failed", "cancelled", timeout=60)
        assert paused["state"] == "paused", paused["reason"]
        first = _attempts(client, job_id)[0]
        assert first["last_checkpoint"], "pause left no checkpoint"
        saved = int(first["last_checkpoint"].rsplit("-", 1)[1])
        assert saved >= 30
        # its Slurm job ended with the supervisor: its CPUs are free while paused
        record = wait_for(
            lambda: (
                (j := cluster.cli.job(first["slurm_job_id"]))
                and j.state not in ("RUNNING", "COMPLETING")
                and j
            ),
            timeout=30,
            what="the paused attempt's Slurm job to end",
        )
        assert record.state == "COMPLETED", record
        assert client.post(f"/api/jobs/{job_id}/resume").status_code == 200
        wait_for(
            lambda: (client.get(f"/api/jobs/{job_id}").json()["step"] or 0) > saved + 5,
            timeout=120,
            what="the resumed run",
        )
        second = _attempts(client, job_id)[1]
        assert client.post(f"/api/jobs/{job_id}/cancel").status_code == 200
        stack.wait_job(client, job_id, "cancelled", timeout=60)
    assert second["resume_from"] == first["last_checkpoint"]
    assert second["slurm_job_id"] and second["slurm_job_id"] != first["slurm_job_id"]
    engine = sa.create_engine(stack.database_url)
    with engine.connect() as db:
        steps = db.execute(
            sa.text(
                "SELECT attempt_id, min(step), max(step), count(*), count(DISTINCT step)"
                " FROM metric_points WHERE name = 'loss' AND attempt_id IN (:a, :b)"
                " GROUP BY attempt_id ORDER BY attempt_id"
            ),
            {"a": first["id"], "b": second["id"]},
        ).all()
    engine.dispose()
    (_, _, first_last, first_n, first_distinct), (_, resumed_at, _, n, distinct) = steps
    assert first_last == saved  # nothing past the checkpoint: no step counted twice
    assert resumed_at == saved + 1  # nothing missing
    assert (first_n, n) == (first_distinct, distinct)
