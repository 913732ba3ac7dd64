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

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from backend.executors.slurm.cli import BatchRequest
from tests.executors.conftest import SLURM_TESTS
from tests.executors.slurm_stack import SlurmStack, slurm_stack
from tests.job_users import open_scratch
from tests.slurm_cluster import SlurmCluster, slurm_cluster
from tests.stack import wait_for

pytestmark = SLURM_TESTS

#: seconds between Slurm's SIGTERM to a preempted job and its kill
GRACE_TIME = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    root = tmp_path_factory.mktemp("slurm-preempt")
    with slurm_cluster(root, cpus=2, kill_wait=2, grace_time=GRACE_TIME) as running:
        yield running


@pytest.fixture(scope="module")
def stack(cluster: SlurmCluster) -> Iterator[SlurmStack]:
    with (
        open_scratch("tb-slurm-preempt-") as scratch,
        slurm_stack(scratch, cluster, {"TRAINBOARD_SLURM_PARTITION": "low"}) as running,
    ):
        yield running


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
        other = cluster.cli.submit(
            BatchRequest(
                name="other-team",
                script="#!/bin/sh\nsleep 25\n",
                nodes=1,
                cpus_per_task=2,
                partition="high",
            )
        )
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
    engine = sa.create_engine(stack.database_url)
    with engine.connect() as db:
        steps = db.execute(
            sa.text(
                # each of the 2 ranks reports its loss: (rank, step) is one point
                "SELECT attempt_id, min(step), max(step), count(*),"
                " count(DISTINCT rank * 1000000 + step)"
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
