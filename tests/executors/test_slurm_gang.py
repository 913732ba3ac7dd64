"""A gang across two Slurm hosts (two slurmds in network namespaces) under the Slurm executor."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.executors.conftest import SLURM_TESTS, cluster_of
from tests.executors.slurm_stack import SlurmStack
from tests.slurm_cluster import SlurmCluster
from tests.stack import wait_for

pytestmark = SLURM_TESTS


#: two hosts; Trainboard's jobs go to `low` (the default partition), one of `high` preempts them
cluster = cluster_of("slurm-gang", cpus=2, kill_wait=2, hosts=2, grace_time=30)


def test_a_two_node_gang_gets_both_hosts_from_slurm_rendezvous_and_succeeds(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    spec = {
        "name": "gang",
        "template": "mlp",
        "parallelism": {"strategy": "data", "devices": 2, "nodes": 2},
        "hyperparameters": {"steps": 30, "batch_size": 16},
    }
    with stack.client() as client:
        created = stack.post(client, "/api/jobs", spec)
        assert created.status_code == 201, created.text
        job_id = created.json()["id"]
        job = stack.wait_job(client, job_id, "succeeded", "failed", "restarting", timeout=300)
        assert job["state"] == "succeeded", (job["reason"], stack.log_path.read_text()[-3000:])
        attempts = stack.get(client, f"/api/jobs/{job_id}/attempts")
        loss = stack.get(client, f"/api/jobs/{job_id}/metrics/loss")
    assert len(attempts) == 1
    slurm_id = attempts[0]["slurm_job_id"]
    record = wait_for(
        lambda: (j := cluster.cli.job(slurm_id)) and j.state == "COMPLETED" and j,
        timeout=30,
        what=f"Slurm job {slurm_id} to complete",
    )
    assert record.nodes == ("h1", "h2")  # one supervisor per host, from one allocation
    assert attempts[0]["facts"]["world_size"] == 2, attempts[0]["facts"]
    assert loss["step"] and loss["step"][-1] >= 29
    # each rank's loss, one on each host, reached the store the job page reads
    per_rank = stack.loss_series(attempts[0]["id"])[attempts[0]["id"]]
    assert sorted(per_rank) == [0, 1] and all(s[1] >= 29 for s in per_rank.values()), per_rank
    # each host's supervisor sampled its device under its slot, attributed to its rank
    sampled = stack.sql(
        "SELECT node, rank FROM device_samples WHERE attempt_id = :a GROUP BY node, rank"
        " ORDER BY node",
        a=attempts[0]["id"],
    )
    assert [tuple(row) for row in sampled] == [("slurm-0", 0), ("slurm-1", 1)]


#: the ways a host is lost, each with how it comes back: its link cut (peers get "network
#: unreachable"), or its slurmd killed (the link stays up and the processes Slurm started
#: there stay, cut off from their daemon; slurmctld stops hearing from it, SlurmdTimeout 10 s)
LOSSES: dict[str, tuple[Callable[[SlurmCluster], None], Callable[[SlurmCluster], None]]] = {
    "link cut": (lambda c: c.cut("h2"), lambda c: c.restore("h2")),
    "slurmd stopped": (lambda c: c.stop_slurmd("h2"), lambda c: c.start_slurmd("h2")),
}


@pytest.mark.parametrize("loss", LOSSES)
def test_a_host_lost_mid_gang_gives_exactly_one_new_attempt_from_the_newest_checkpoint(
    stack: SlurmStack, cluster: SlurmCluster, loss: str
) -> None:
    """#32 item 6: h2 lost under a running 2-node gang: the attempt ends once, exactly one
    new attempt resumes from the newest checkpoint, held by Slurm while h2 is gone, and
    trains on both hosts again, both ranks from the checkpointed step + 1, once h2 is back."""
    lose, bring_back = LOSSES[loss]
    spec = {
        "name": f"loses-a-host ({loss})",
        "template": "mlp",
        "parallelism": {"strategy": "data", "devices": 2, "nodes": 2},
        "hyperparameters": {"steps": 100_000, "batch_size": 16},
        "checkpoint": {"every_steps": 20},
    }
    with stack.client() as client:
        job_id = stack.post(client, "/api/jobs", spec).json()["id"]

        def attempts() -> list[dict[str, Any]]:
            return list(stack.get(client, f"/api/jobs/{job_id}/attempts"))

        wait_for(
            lambda: (a := attempts()) and a[0]["last_checkpoint"],
            timeout=180,
            what="a checkpoint of the first attempt",
        )
        lose(cluster)
        try:
            second = wait_for(
                lambda: len(a := attempts()) > 1 and a[1],
                timeout=150,
                what="a new attempt after the host was lost",
            )
            first = attempts()[0]
            assert first["state"] in ("failed", "lost"), first
            assert second["resume_from"] == first["last_checkpoint"]
            # the new gang needs both hosts: Slurm holds it while h2 is gone
            waiting = wait_for(
                lambda: (j := stack.get(client, f"/api/jobs/{job_id}"))["wait_reason"] and j,
                timeout=60,
                what="the new attempt to wait in Slurm",
            )
            assert waiting["wait_reason"].startswith("Slurm job "), waiting
            time.sleep(5)
            assert len(attempts()) == 2, "more than one new attempt"
        finally:
            bring_back(cluster)
        saved = int(second["resume_from"].rsplit("-", 1)[1])
        # the new attempt's own points: the job's step was already past `saved` (the lost
        # attempt trained beyond its checkpoint), and waiting on it let the test cancel a
        # new attempt Slurm had not started yet (seen: no point of it; its Slurm job read
        # PENDING after the cancel, before the executor's next pass scancelled it)
        stack.wait_attempt_step(
            second["id"], saved + 6, ranks=2, timeout=240, what="training on both hosts"
        )
        assert len(attempts()) == 2
        slurm_id = attempts()[1]["slurm_job_id"]
        record = wait_for(
            lambda: (r := cluster.cli.job(slurm_id)) and r.state == "RUNNING" and r,
            timeout=30,
            what=f"Slurm job {slurm_id} running",
        )
        assert record.nodes == ("h1", "h2"), record
        assert stack.post(client, f"/api/jobs/{job_id}/cancel").status_code == 200
        stack.wait_job(client, job_id, "cancelled", timeout=60)
        second = attempts()[1]
    # both ranks of the new attempt began right after the checkpoint (none missing)
    series = stack.loss_series(second["id"])[second["id"]]
    assert {rank: s[0] for rank, s in series.items()} == {0: saved + 1, 1: saved + 1}, series


def test_a_gang_slurm_preempts_checkpoints_on_both_hosts_and_resumes_at_its_step(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    """#32 item 5 on two hosts: a job of a higher tier needs one host's CPUs, Slurm preempts
    the whole 2-node gang; both supervisors learn it from the controller, the ranks save one
    checkpoint together, the attempt ends without spending a restart, and a new gang, held
    by Slurm meanwhile, resumes at the checkpointed step on both hosts again."""
    spec = {
        "name": "preempted-gang",
        "template": "mlp",
        "parallelism": {"strategy": "data", "devices": 2, "nodes": 2},  # 1 CPU on each host
        "hyperparameters": {"steps": 100_000, "batch_size": 16},
        "checkpoint": {"every_steps": 100_000},  # only the one the preemption asks for
        "max_restarts": 0,  # a restart spent would fail it
    }
    with stack.client() as client:
        job_id = stack.post(client, "/api/jobs", spec).json()["id"]
        stack.wait_step(client, job_id, 30, timeout=180, what="the gang training")
        other = cluster.occupy(partition="high", cpus=2, seconds=15)
        attempts = wait_for(
            lambda: len(a := stack.attempts(client, job_id)) > 1 and a[1]["slurm_job_id"] and a,
            timeout=120,
            what="a new attempt after the preemption",
        )
        first = attempts[0]
        saved = int(first["last_checkpoint"].rsplit("-", 1)[1])
        stack.wait_step(client, job_id, saved + 6, timeout=180, what="the resumed gang")
        job = stack.get(client, f"/api/jobs/{job_id}")
        second = stack.attempts(client, job_id)[1]
        record = cluster.cli.job(second["slurm_job_id"])
        other_record = cluster.cli.job(other)
        assert stack.post(client, f"/api/jobs/{job_id}/cancel").status_code == 200
        stack.wait_job(client, job_id, "cancelled", timeout=60)
    assert "preempted by Slurm" in first["exit_reason"], first["exit_reason"]
    assert job["restarts"] == 0 and job["state"] == "running"
    assert other_record is not None and other_record.state in ("RUNNING", "COMPLETED")
    assert record is not None and record.nodes == ("h1", "h2")  # both hosts again
    assert second["resume_from"] == first["last_checkpoint"]
    assert (first["facts"]["world_size"], second["facts"]["world_size"]) == (2, 2)
    stack.assert_resumed_at(first["id"], second["id"], saved, ranks=2)
