"""Trainboard on Slurm end to end: `trainboard up --executor slurm` on a real one-host Slurm.

Jobs go in through the REST API; each attempt becomes one `sbatch` whose `srun` starts the
supervisor (workers/node/slurm_step.py), which claims, runs the ranks and reports through
the node routes as a worker node's would.
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from backend.executors.slurm.states import TERMINAL
from tests.executors.conftest import SLURM_TESTS
from tests.executors.slurm_stack import SlurmStack, mlp_job
from tests.slurm_cluster import SlurmCluster
from tests.stack import wait_for

pytestmark = SLURM_TESTS


def _attempts(client: httpx.Client, job_id: int) -> list[dict[str, Any]]:
    return list(client.get(f"/api/jobs/{job_id}/attempts").json())


def _with_slurm_id(client: httpx.Client, job_id: int) -> dict[str, Any]:
    """The job's first attempt once its Slurm job id is stored (the scheduler's pass after
    sbatch, which a job Slurm starts at once may follow)."""
    return wait_for(
        lambda: (a := _attempts(client, job_id)[0])["slurm_job_id"] and a,
        timeout=30,
        what="the attempt's Slurm job id",
    )


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


def _nothing_left(cluster: SlurmCluster, step_dir: Path, run_dir: Path) -> None:
    """Within Slurm's KillWait + 5 s, no process of the attempt (its step) or job (its run
    dir) is left."""
    wait_for(
        lambda: not _processes_of(step_dir) and not _processes_of(run_dir),
        timeout=cluster.kill_wait + 5,
        what="no process of the job left",
    )


def _supervisors(folder: Path) -> list[psutil.Process]:
    """The attempt's srun and its supervisor (`-m workers.node.slurm_step <folder>`), not
    the supervisor's children between fork and exec (a rank, provenance's short-lived
    commands), which carry its command line for a moment: killing one of those instead, or
    one that has exited meanwhile (NoSuchProcess), left the supervisor running."""
    found: dict[int, psutil.Process] = {}
    for proc in _processes_of(folder):
        with contextlib.suppress(psutil.Error):
            if "workers.node.slurm_step" in proc.cmdline():
                found[proc.pid] = proc
    parents: dict[int, int] = {}
    for pid, proc in found.items():
        with contextlib.suppress(psutil.Error):
            parents[pid] = proc.ppid()
    return [proc for pid, proc in found.items() if pid in parents and parents[pid] not in found]


def test_a_job_runs_through_sbatch_and_srun_to_succeeded(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    with stack.client() as client:
        job_id = client.post("/api/jobs", json=mlp_job("on-slurm")).json()["id"]
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
    sampled = stack.sql(
        "SELECT node, device, rank FROM device_samples WHERE attempt_id = :a"
        " GROUP BY node, device, rank",
        a=attempts[0]["id"],
    )
    assert [tuple(row) for row in sampled] == [("slurm-0", 0, 0)]


def test_a_job_behind_another_shows_slurms_reason_and_cancel_leaves_nothing(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    with stack.client() as client:
        # both CPUs for a long while, training (a stop during its ranks' start-up has nothing
        # to save: they are signalled before they built anything, seen here under load); then
        # a second job that needs them too
        first_id = stack.hold_both(client, step=10)
        second = client.post("/api/jobs", json=mlp_job("waits", devices=2))
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
        _nothing_left(cluster, step_dir, run_dir)
        first_slurm = running["slurm_job_id"]
        wait_for(
            lambda: first_slurm not in cluster.cli.queue("tb-"),
            timeout=30,
            what="the cancelled job's Slurm job to end",
        )
        # its ranks saved a final checkpoint at the step they stopped at (#32 item 3)
        cancelled = _attempts(client, first_id)[0]
        assert cancelled["last_checkpoint"], cancelled
        saved = int(cancelled["last_checkpoint"].rsplit("-", 1)[1])
        assert (Path(cancelled["last_checkpoint"]) / ".metadata").is_file()
        ranks = wait_for(
            lambda: (
                (found := stack.loss_series(cancelled["id"]).get(cancelled["id"], {}))
                and len(found) == 2
                and min(series[1] for series in found.values()) >= saved
                and found
            ),
            timeout=30,
            what="both ranks' loss points up to the checkpointed step",
        )
        assert all(series[1] == saved for series in ranks.values()), (saved, ranks)
        # the waiting one now gets the CPUs
        done = stack.wait_job(client, second_id, "succeeded", "failed", timeout=240)
        assert done["state"] == "succeeded", done["reason"]
        assert done["wait_reason"] is None


def test_a_cancel_whose_supervisor_does_not_answer_is_scancelled_after_its_grace(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    """Cancel, then scancel (#32 item 3) when the supervisors do not stop: the jobs service
    sets the control key only, so the executor starts the grace when it sees the request
    (the supervisors' stop grace, 30 s in this stack, + 20 s) and then scancels; Slurm ends
    the job and its processes, and the job is cancelled. Without that the job would stay
    cancelling with its Slurm job running (its allocation held) for as long as the
    supervisor is stuck."""
    spec = {**mlp_job("frozen", steps=100_000), "max_restarts": 0}
    with stack.client() as client:
        job_id = client.post("/api/jobs", json=spec).json()["id"]
        stack.wait_step(client, job_id, 5, timeout=180, what="some training")
        attempt = _with_slurm_id(client, job_id)
        step_dir = stack.data_dir / "slurm" / f"attempt-{attempt['id']}"
        [supervisor] = [p for p in _supervisors(step_dir) if p.name() != "srun"]
        supervisor.suspend()  # SIGSTOP: it never reads the control key, never reports
        assert client.post(f"/api/jobs/{job_id}/cancel").status_code == 200
        job = stack.wait_job(client, job_id, "cancelled", "failed", timeout=120)
        ended = _attempts(client, job_id)[0]
    slurm_id = attempt["slurm_job_id"]
    assert job["state"] == "cancelled", job["reason"]
    # scancelled (the test cancels nothing in Slurm: the executor did). Slurm's SIGCONT
    # before its SIGTERM may wake the supervisor in time to report: the attempt then ends
    # with its reason ("stopped on cancel request", or the SIGTERM read first: both seen),
    # else with Slurm's ("... ended without its supervisors' report: Slurm: CANCELLED")
    assert f"REQUEST_KILL_JOB JobId={slurm_id} " in cluster.log("slurmctld")
    assert ended["state"] != "running" and ended["exit_reason"], ended
    _nothing_left(cluster, step_dir, stack.data_dir / "runs" / f"job-{job_id}")


def test_a_supervisor_killed_under_slurm_ends_its_attempt_with_slurms_state(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    spec = {**mlp_job("killed", steps=100_000), "max_restarts": 0}
    with stack.client() as client:
        job_id = client.post("/api/jobs", json=spec).json()["id"]
        stack.wait_job(client, job_id, "running", timeout=120)
        # its Slurm job id is stored by the scheduler's pass after sbatch, which a job Slurm
        # starts at once may follow: the claim (seen: "Slurm job None" read here)
        attempt = _with_slurm_id(client, job_id)
        step_dir = stack.data_dir / "slurm" / f"attempt-{attempt['id']}"
        steps = wait_for(
            lambda: _supervisors(step_dir), timeout=30, what="the attempt's supervisor"
        )
        for step in steps:
            with contextlib.suppress(psutil.NoSuchProcess):
                step.kill()  # no report of how it ended reaches the API
        job = stack.wait_job(client, job_id, "failed", "succeeded", timeout=60)
        ended = _attempts(client, job_id)[0]
    assert job["state"] == "failed"
    slurm_id = attempt["slurm_job_id"]
    assert ended["state"] == "failed"
    assert ended["exit_reason"].startswith(
        f"Slurm job {slurm_id} ended without its supervisors' report: Slurm: FAILED"
    ), ended["exit_reason"]
    _nothing_left(cluster, step_dir, stack.data_dir / "runs" / f"job-{job_id}")


def _pause_after(stack: SlurmStack, client: httpx.Client, job_id: int, step: int) -> Any:
    """Train to `step`, pause: (the paused attempt, its checkpoint's step)."""
    stack.wait_step(client, job_id, step, timeout=120, what="some training")
    assert client.post(f"/api/jobs/{job_id}/pause").status_code == 200
    paused = stack.wait_job(client, job_id, "paused", "failed", "cancelled", timeout=60)
    assert paused["state"] == "paused", paused["reason"]
    first = stack.attempts(client, job_id)[0]
    if not first["last_checkpoint"]:  # what its supervisor said, to see why
        outputs = (stack.data_dir / "slurm" / f"attempt-{first['id']}").glob("slurm-*.out")
        said = "".join(path.read_text(errors="replace")[-3000:] for path in outputs)
        raise AssertionError(f"pause left no checkpoint: {first}\n{said}")
    saved = int(first["last_checkpoint"].rsplit("-", 1)[1])
    assert saved >= step
    return first, saved


def test_pause_ends_the_slurm_job_and_resume_continues_at_the_checkpointed_step(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    spec = {**mlp_job("pausable", steps=100_000), "checkpoint": {"every_steps": 1000}}
    with stack.client() as client:
        job_id = client.post("/api/jobs", json=spec).json()["id"]
        first, saved = _pause_after(stack, client, job_id, 30)
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
        stack.wait_step(client, job_id, saved + 6, timeout=120, what="the resumed run")
        second = _attempts(client, job_id)[1]
        assert client.post(f"/api/jobs/{job_id}/cancel").status_code == 200
        stack.wait_job(client, job_id, "cancelled", timeout=60)
    assert second["resume_from"] == first["last_checkpoint"]
    assert second["slurm_job_id"] and second["slurm_job_id"] != first["slurm_job_id"]
    stack.assert_resumed_at(first["id"], second["id"], saved, ranks=1)


@pytest.mark.parametrize(("before", "after"), [(2, 1), (1, 2)], ids=["shrinks", "grows"])
def test_a_paused_job_resumes_on_another_cpu_count_in_a_slurm_job_of_that_size(
    stack: SlurmStack, cluster: SlurmCluster, before: int, after: int
) -> None:
    """Resume on another device count (#32 item 4): paused on `before` ranks, resumed on
    `after` (2: the whole test node). The new Slurm job asks `after` CPUs, the engine keeps
    the checkpoint's global batch, and every rank's loss series has no step twice and none
    missing across the two: the resumed ranks all begin right after the checkpointed step."""
    spec = {
        **mlp_job(f"{before}-to-{after}", devices=before, steps=100_000),
        "checkpoint": {"every_steps": 1000},
    }
    with stack.client() as client:
        job_id = client.post("/api/jobs", json=spec).json()["id"]
        stack.wait_step(client, job_id, 10, timeout=120, what=f"training on {before} ranks")
        slurm_id = _with_slurm_id(client, job_id)["slurm_job_id"]
        assert cluster.cli.queue("tb-")[slurm_id].tres["cpu"] == str(before)
        first, saved = _pause_after(stack, client, job_id, 30)
        resumed = client.post(f"/api/jobs/{job_id}/resume", json={"devices": after})
        assert resumed.status_code == 200, resumed.text
        stack.wait_step(
            client, job_id, saved + 6, timeout=180, what=f"the run resumed on {after} ranks"
        )
        second = _attempts(client, job_id)[1]
        queued = cluster.cli.queue("tb-")[second["slurm_job_id"]]
        assert (queued.state, queued.tres["cpu"]) == ("RUNNING", str(after))
        assert client.post(f"/api/jobs/{job_id}/cancel").status_code == 200
        stack.wait_job(client, job_id, "cancelled", timeout=60)
        second = _attempts(client, job_id)[1]
    assert second["resume_from"] == first["last_checkpoint"]
    assert [len(a["placement"][0]["devices"]) for a in (first, second)] == [before, after]
    assert (first["facts"]["world_size"], second["facts"]["world_size"]) == (before, after)
    assert second["facts"]["global_batch"] == first["facts"]["global_batch"]
    # every rank of the first attempt reported
    assert set(stack.loss_series(first["id"])[first["id"]]) == set(range(before))
    stack.assert_resumed_at(first["id"], second["id"], saved, ranks=after)


def test_a_slurm_job_requeued_behind_trainboards_back_never_runs_its_attempt_twice(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    """#32 item 5's fence: an operator's `scontrol requeue` of a running Trainboard job (made
    requeueable by hand first: 22.05 refuses it for a --no-requeue job) stops its run (the
    attempt ends as any SIGTERM'd one) and puts the same Slurm job id back in the queue,
    restart count 1. That is not the attempt's: the executor scancels it, so it never runs
    (were it started, its step would exit before reading its orders, test_slurm_step.py);
    a restart is a new attempt in a new Slurm job."""
    spec = {**mlp_job("requeued", steps=100_000), "max_restarts": 1}
    with stack.client() as client:
        job_id = client.post("/api/jobs", json=spec).json()["id"]
        stack.wait_step(client, job_id, 10, timeout=120, what="some training")
        first = _with_slurm_id(client, job_id)
        slurm_id = first["slurm_job_id"]
        scontrol = [*cluster.hosts[0].command(cluster.root, []), "scontrol"]

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*scontrol, *args], env=cluster.env, capture_output=True, text=True
            )

        # 22.05 refuses to requeue a --no-requeue job ...
        refused = run("requeue", slurm_id)
        assert "presently disabled" in refused.stderr, refused
        # ... unless an operator makes it requeueable first
        assert run("update", f"JobId={slurm_id}", "Requeue=1").returncode == 0
        done = run("requeue", slurm_id)
        assert done.returncode == 0, done.stderr
        # the second run of that Slurm job ends, cancelled by the executor
        record = wait_for(
            lambda: (j := cluster.cli.job(slurm_id)) and j.state in TERMINAL and j,
            timeout=90,
            what=f"the requeued Slurm job {slurm_id} to end",
        )
        attempts = _attempts(client, job_id)
        assert client.post(f"/api/jobs/{job_id}/cancel").status_code == 200
        stack.wait_job(client, job_id, "cancelled", "failed", timeout=60)
    assert (record.state, record.restarts) == ("CANCELLED", 1), record
    # scancelled (the test cancels nothing in Slurm: the executor did)
    assert f"REQUEST_KILL_JOB JobId={slurm_id} " in cluster.log("slurmctld")
    assert attempts[0]["id"] == first["id"] and attempts[0]["state"] != "running", attempts
    # a later attempt, if any, is a new Slurm job, never the requeued one
    assert all(a["slurm_job_id"] != slurm_id for a in attempts[1:]), attempts
    out = (stack.data_dir / "slurm" / f"attempt-{first['id']}").glob("slurm-*.out")
    said = "".join(path.read_text(errors="replace") for path in out)
    assert said.count(f"attempt {first['id']}: started") == 1, said[-3000:]  # one run only
    assert "DUE TO JOB REQUEUE" in said, said[-3000:]
