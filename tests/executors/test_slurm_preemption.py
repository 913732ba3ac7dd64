"""Slurm's own preemption under the Slurm executor: checkpoint, back to Slurm, resume at its step.

A real one-host Slurm with two partitions (`low`, Trainboard's, and `high` of a higher
PriorityTier; `PreemptType=preempt/partition_prio`, `PreemptMode=REQUEUE`, `GraceTime` on
`low`) preempts a running Trainboard job for another team's job submitted straight to
`high`. Trainboard owns restarts (`--no-requeue`): the supervisor learns from the controller
that its job was picked (PreemptTime), the ranks checkpoint within the grace, the attempt
ends as a platform stop (no restart spent), and a new Slurm job, held by Slurm while the
other one runs, resumes at the checkpointed step.
"""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.executors.conftest import SLURM_TESTS, cluster_of
from tests.executors.slurm_stack import SlurmStack, stack_with_scripts
from tests.slurm_cluster import SlurmCluster
from tests.stack import wait_for
from workers.contract.checkpoints import step_of

pytestmark = SLURM_TESTS

#: seconds between Slurm's SIGTERM to a preempted job and its kill
GRACE_TIME = 30


cluster = cluster_of("slurm-preempt", cpus=2, kill_wait=2, grace_time=GRACE_TIME)


@pytest.fixture(scope="module")
def stack(cluster: SlurmCluster) -> Iterator[SlurmStack]:
    env = {
        "TRAINBOARD_SLURM_PARTITION": "low",
        # the supervisor's own kill of ranks that do not stop comes after Slurm's (the
        # grace overrun below is Slurm's to end); cooperative ranks stop at once anyway
        "TRAINBOARD_STOP_GRACE_SECONDS": "90",
    }
    scripts = {"torn.py": TORN_SAVE}
    with stack_with_scripts("tb-slurm-preempt-", cluster, scripts, env) as running:
        yield running


#: a program that saves a complete checkpoint every 10 steps (its metadata written last,
#: then the checkpoint event) and, once asked to stop on its first run, starts a save it
#: never finishes: killed by Slurm in it, it leaves a torn `step-N` without metadata (a
#: resumed run stops at once)
TORN_SAVE = textwrap.dedent(
    """
    import time
    from workers import sdk

    folder = sdk.checkpoint_dir()
    step = resumed = sdk.resume_step() or 0
    while True:
        step += 1
        time.sleep(0.05)
        sdk.report(step, loss=1.0 / step)
        if sdk.should_stop() and resumed:
            break
        if sdk.should_stop():
            torn = folder / f"step-{step}"
            torn.mkdir()
            (torn / "weights").write_text("half of them")
            sdk.flush()
            time.sleep(3600)  # a save that overruns the partition's GraceTime
        if step % 10 == 0:
            done = folder / f"step-{step}"
            done.mkdir()
            (done / "weights").write_text(str(step))
            (done / ".metadata").write_text("{}")
            sdk.event("checkpoint", message=str(done), step=step)
    """
)


def _attempts(client: httpx.Client, job_id: int) -> list[dict[str, Any]]:
    return list(client.get(f"/api/jobs/{job_id}/attempts").json())


@pytest.mark.timeout(600)
def test_a_job_slurm_preempts_checkpoints_waits_in_slurm_and_resumes_at_its_step(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    spec = {
        "name": "preemptable",
        "template": "mlp",
        "parallelism": {"strategy": "data", "devices": 2},  # both CPUs of the node
        "hyperparameters": {"steps": 100_000, "batch_size": 16},
        "checkpoint": {"every_steps": 100_000},  # only the one the preemption asks for
        "max_restarts": 0,  # a restart spent would fail it
    }
    with stack.client() as client:
        job_id = client.post("/api/jobs", json=spec).json()["id"]
        wait_for(
            lambda: (client.get(f"/api/jobs/{job_id}").json()["step"] or 0) >= 30,
            timeout=180,
            what="some training",
        )
        first = _attempts(client, job_id)[0]
        assert cluster.cli.queue("tb-")[first["slurm_job_id"]].partition == "low"
        # another team's job on the higher tier needs the whole node
        other = cluster.occupy(partition="high", cpus=2, seconds=25)
        # the preempted attempt checkpoints and ends; a second one waits in Slurm
        second = wait_for(
            lambda: (a := _attempts(client, job_id)) and len(a) > 1 and a[1]["slurm_job_id"] and a,
            timeout=120,
            what="a new attempt after the preemption",
        )
        first, second = second[0], second[1]
        queue = cluster.cli.queue("")
        if other in queue and queue[other].state == "RUNNING":  # Slurm holds ours meanwhile
            assert queue[second["slurm_job_id"]].state == "PENDING"
        resumed_at_least = int(first["last_checkpoint"].rsplit("-", 1)[1]) + 5
        wait_for(
            lambda: (client.get(f"/api/jobs/{job_id}").json()["step"] or 0) > resumed_at_least,
            timeout=180,
            what="the resumed run",
        )
        job = client.get(f"/api/jobs/{job_id}").json()
        second = _attempts(client, job_id)[1]
        other_record = cluster.cli.job(other)
        assert client.post(f"/api/jobs/{job_id}/cancel").status_code == 200
        stack.wait_job(client, job_id, "cancelled", timeout=60)
    assert "preempted by Slurm" in first["exit_reason"], first["exit_reason"]
    assert "not counted against max_restarts" in first["exit_reason"]
    assert job["restarts"] == 0 and job["state"] == "running"
    assert other_record is not None and other_record.state == "COMPLETED"
    saved = int(first["last_checkpoint"].rsplit("-", 1)[1])
    assert second["resume_from"] == first["last_checkpoint"]
    assert second["slurm_job_id"] != first["slurm_job_id"]
    stack.assert_resumed_at(first["id"], second["id"], saved, ranks=2)


@pytest.mark.timeout(300)
def test_a_save_that_overruns_gracetime_is_killed_and_the_job_resumes_from_the_last_good_one(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    """#32 item 5: Slurm kills a preempted job whose checkpoint is still being written when
    GraceTime ends. The attempt ends with Slurm's state (no report came), spends no restart,
    and the next one resumes from the newest complete checkpoint, never the torn one."""
    grace = ["scontrol", "update", "PartitionName=low"]
    subprocess.run([*grace, "GraceTime=2"], env=cluster.env, check=True, capture_output=True)
    try:
        spec = {
            "name": "torn-save",
            "entrypoint": {"script": "torn.py"},
            "parallelism": {"strategy": "data", "devices": 1},
            "max_restarts": 0,  # a restart spent would fail it
        }
        with stack.client() as client:
            posted = client.post("/api/jobs", json=spec)
            assert posted.status_code == 201, posted.text
            job_id = posted.json()["id"]
            stack.wait_step(client, job_id, 25, timeout=120, what="two complete checkpoints")
            cluster.occupy(partition="high", cpus=2, seconds=10)
            attempts = wait_for(
                lambda: (a := stack.attempts(client, job_id)) and len(a) > 1 and a,
                timeout=150,
                what="a new attempt after Slurm killed the first",
            )
            first = attempts[0]
            good = first["last_checkpoint"]
            saved = int(good.rsplit("-", 1)[1])
            stack.wait_step(client, job_id, saved + 15, timeout=120, what="the resumed run")
            job = client.get(f"/api/jobs/{job_id}").json()
            second = stack.attempts(client, job_id)[1]
            assert client.post(f"/api/jobs/{job_id}/cancel").status_code == 200
            stack.wait_job(client, job_id, "cancelled", timeout=60)
    finally:
        subprocess.run([*grace, f"GraceTime={GRACE_TIME}"], env=cluster.env, check=True)
    # killed by Slurm, not stopped by its supervisor: the executor read Slurm's end
    assert first["exit_reason"].startswith(
        f"Slurm job {first['slurm_job_id']} ended without its supervisors' report: Slurm: PREEMPTED"
    ), first["exit_reason"]
    assert first["state"] == "stopped" and job["restarts"] == 0
    # the save Slurm cut short: a step-N past the good one, without its metadata
    [torn] = [p for p in Path(good).parent.iterdir() if (step_of(p) or 0) > saved]
    assert (torn / "weights").exists() and not (torn / ".metadata").exists()
    assert saved % 10 == 0 and (step_of(torn) or 0) < saved + 10
    assert second["resume_from"] == good  # the newest complete checkpoint
    series = stack.loss_series(first["id"], second["id"])
    assert series[second["id"]][0][0] == saved + 1
    assert all(s[2] == s[3] for a in series.values() for s in a.values())
