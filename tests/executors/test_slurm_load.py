"""Load discipline of the Slurm executor (#32, item 9): 200 queued jobs, one squeue a second."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.executors.conftest import SLURM_TESTS
from tests.executors.slurm_stack import SlurmStack, slurm_stack
from tests.job_users import open_scratch
from tests.slurm_cluster import SlurmCluster
from tests.stack import wait_for

pytestmark = SLURM_TESTS

JOBS = 200


@pytest.fixture(scope="module")
def stack(cluster: SlurmCluster) -> Iterator[SlurmStack]:
    limits = {"TRAINBOARD_SUBMIT_RATE_LIMIT": str(JOBS * 2)}
    # outside pytest's tmp, which a concurrent pytest session makes 0700 (conftest.py)
    with (
        open_scratch("tb-slurm-load-") as scratch,
        slurm_stack(scratch, cluster, limits) as running,
    ):
        yield running


def job_info_rpcs(cluster: SlurmCluster) -> int:
    """How many job-info requests (squeue, scontrol show job) slurmctld has answered."""
    out = subprocess.run(
        ["sdiag"], env=cluster.env, capture_output=True, text=True, check=True
    ).stdout
    found = re.search(r"REQUEST_JOB_INFO\s+\(\s*\d+\)\s+count:(\d+)", out)
    return int(found.group(1)) if found else 0


def _submitted(stack: SlurmStack) -> int:
    [(count,)] = stack.sql("SELECT count(*) FROM attempts WHERE slurm_job_id IS NOT NULL")
    return int(count)


def test_200_queued_jobs_cost_the_controller_one_squeue_a_second(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    spec: dict[str, Any] = {
        "template": "mlp",
        "parallelism": {"strategy": "data", "devices": 1},
        "hyperparameters": {"steps": 100_000, "batch_size": 16},
    }
    with stack.client() as client:
        started = time.monotonic()
        ids = []
        for n in range(JOBS):
            created = client.post("/api/jobs", json={**spec, "name": f"load-{n}"})
            assert created.status_code == 201, created.text
            ids.append(created.json()["id"])
        wait_for(lambda: _submitted(stack) == JOBS, timeout=300, what="every job in Slurm")
        all_in = time.monotonic() - started
        queued = cluster.cli.queue("tb-")
        assert len(queued) == JOBS
        assert sum(j.state == "PENDING" for j in queued.values()) == JOBS - 2  # 2 CPUs
        before, window = job_info_rpcs(cluster), 10.0
        time.sleep(window)
        rpcs = job_info_rpcs(cluster) - before - 1  # sdiag's own read is not one
        # one squeue per ~second for all 200 (POLL_SECONDS), nothing per job
        assert rpcs <= window * 1.5, f"{rpcs} job-info RPCs in {window:.0f} s"
        began = time.monotonic()
        cluster.cli.queue("tb-")
        squeue_seconds = time.monotonic() - began
        assert squeue_seconds < 2.0, f"squeue took {squeue_seconds:.1f} s with {JOBS} jobs"
        for job_id in ids:
            assert client.post(f"/api/jobs/{job_id}/cancel").status_code == 200
        wait_for(
            lambda: not cluster.cli.queue("tb-"),
            timeout=120,
            what="every cancelled job gone from Slurm (pending ones scancelled at once)",
        )
        states = {client.get(f"/api/jobs/{job_id}").json()["state"] for job_id in ids}
    assert states == {"cancelled"}
    print(
        f"{JOBS} jobs in Slurm {all_in:.1f} s after the first POST; {rpcs} job-info RPCs "
        f"in {window:.0f} s; squeue with {JOBS} jobs {squeue_seconds:.2f} s"
    )
