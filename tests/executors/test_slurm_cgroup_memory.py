"""A job over its memory on a Slurm that enforces memory with cgroups (#32 item 7).

task/cgroup on the machine's cgroup v1 memory controller (`tests/slurm_cluster.CGROUP_CONF`):
each step's processes live in a memory cgroup limited to its job's memory, and the kernel's
OOM killer inside it kills the largest of them, here the rank, not the step's supervisor.
Slurm records the step OUT_OF_MEMORY. The attempt must fail *out of memory*, the prefix
the job's OOM rules (health.on_oom) act on, and say so in Slurm's words.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.executors.conftest import SLURM_TESTS, cluster_of
from tests.executors.slurm_stack import SlurmStack, stack_with_scripts
from tests.executors.test_slurm_limits import GROWS, MEMORY, run_growing
from tests.slurm_cluster import SlurmCluster, cgroups_usable
from tests.stack import wait_for

pytestmark = [
    *SLURM_TESTS,
    pytest.mark.skipif(
        not cgroups_usable(), reason="task/cgroup needs cgroup v1's memory controller, writable"
    ),
]

#: Slurm's states of a job not yet ended
ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED")

cluster = cluster_of("slurm-cgroup", cpus=2, kill_wait=30, memory=MEMORY, cgroups=True)


@pytest.fixture(scope="module")
def stack(cluster: SlurmCluster) -> Iterator[SlurmStack]:
    with stack_with_scripts("tb-slurm-cgroup-", cluster, {"grows.py": GROWS}, {}) as running:
        yield running


def test_a_rank_killed_by_the_cgroup_oom_killer_fails_out_of_memory(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    job, attempt = run_growing(stack, "grows-in-a-cgroup")
    slurm_id = attempt["slurm_job_id"]
    record = wait_for(
        lambda: (j := cluster.cli.job(slurm_id)) and j.state not in ACTIVE and j,
        timeout=60,
        what=f"Slurm job {slurm_id} to end",
    )
    assert (job["state"], attempt["state"]) == ("failed", "failed"), attempt["exit_reason"]
    # the kernel's kill, where and under which limit: the step's cgroup, its job's memory
    assert attempt["exit_reason"].startswith(
        "out of memory: rank 0 was killed by the kernel's out-of-memory killer (memory cgroup "
    ), attempt["exit_reason"]
    assert f"/job_{slurm_id}/step_0" in attempt["exit_reason"], attempt["exit_reason"]
    assert f"limit {MEMORY // 2} MiB)" in attempt["exit_reason"], attempt["exit_reason"]
    # and Slurm saw it too: slurmstepd counted the kill in step 0 (OUT_OF_MEMORY in sacct's
    # step line) and srun exits 1 for it, so 22.05 ends the job FAILED 1; the job itself is
    # OUT_OF_MEMORY only when its batch step is killed (here only `exec srun`, which is not)
    assert (record.state, record.exit_code) == ("FAILED", 1), record
    output = "".join(
        path.read_text(errors="replace")
        for path in (stack.data_dir / "slurm" / f"attempt-{attempt['id']}").glob("slurm-*.out")
    )
    assert f"oom-kill event(s) in StepId={slurm_id}.0" in output, output[-3000:]
