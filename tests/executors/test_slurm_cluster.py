"""The Slurm driver against a real one-host Slurm (munged + slurmctld + slurmd) started here."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from backend.executors.slurm.cli import BatchRequest, SlurmCli, SlurmUnreachable
from backend.executors.slurm.states import ended
from tests.executors.conftest import SLURM_TESTS
from tests.slurm_cluster import (
    SlurmCluster,
    accounting_installed,
    slurm_cluster,
)
from tests.stack import wait_for

pytestmark = SLURM_TESTS


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    """A folder for what a job writes: tmp_path, opened (0755) for the user its tasks run as."""
    tmp_path.chmod(0o755)
    return tmp_path


def _batch(name: str, body: str, *, tasks: int = 1) -> BatchRequest:
    return BatchRequest(name=name, script=f"#!/bin/sh\n{body}\n", nodes=1, tasks_per_node=tasks)


def _final(cli: SlurmCli, job_id: str) -> str:
    return str(
        wait_for(
            lambda: (
                (j := cli.job(job_id))
                and j.state not in ("PENDING", "RUNNING", "COMPLETING")
                and j.state
            ),
            timeout=60,
            what=f"Slurm job {job_id} to end",
        )
    )


def test_a_gang_waits_with_slurms_reason_then_runs_every_task(
    cluster: SlurmCluster, job_dir: Path
) -> None:
    cli = cluster.cli
    out = job_dir / "ranks.txt"
    first = cli.submit(
        _batch("tb-t1-1-1", f"srun sh -c 'echo $SLURM_PROCID >> {out}; sleep 3'", tasks=2)
    )
    second = cli.submit(_batch("tb-t1-2-1", "sleep 1", tasks=2))
    queue = wait_for(
        lambda: (q := cli.queue("tb-t1-")) and q.get(first) and q[first].state == "RUNNING" and q,
        timeout=30,
        what="the first job to run",
    )
    assert queue[second].state == "PENDING"
    assert queue[second].reason in ("Resources", "Priority")  # the whole node is taken
    assert queue[first].nodes == (cluster.node,)
    assert _final(cli, first) == "COMPLETED"
    assert sorted(out.read_text().split()) == ["0", "1"]  # both tasks ran under srun
    assert _final(cli, second) == "COMPLETED"
    assert cli.queue("tb-t1-") == {}


def test_a_failed_job_maps_to_failed_with_its_exit_code(cluster: SlurmCluster) -> None:
    cli = cluster.cli
    job_id = cli.submit(_batch("tb-t2-1-1", "exit 7"))
    assert _final(cli, job_id) == "FAILED"
    record = cli.job(job_id)
    assert record is not None and record.exit_code == 7
    end = ended(record.state, exit_code=record.exit_code, reason=record.reason)
    assert (end.outcome, end.platform_fault) == ("failed", False)
    assert "exit code 7" in end.reason


def test_scancel_leaves_no_process_of_the_job_within_killwait_plus_5_s(
    cluster: SlurmCluster, job_dir: Path
) -> None:
    cli = cluster.cli
    pids = job_dir / "pids"
    # a task that ignores SIGTERM and leaves a child: only SIGKILL after KillWait ends them
    body = f"srun sh -c 'trap \"\" TERM; sleep 300 & echo $$ $! >> {pids}; wait'"
    job_id = cli.submit(_batch("tb-t3-1-1", body))
    wait_for(lambda: pids.exists() and pids.read_text().strip(), timeout=30, what="the task")
    started = [int(p) for p in pids.read_text().split()]
    assert all(psutil.pid_exists(p) for p in started)
    cli.cancel(job_id)
    cancelled_at = time.monotonic()
    wait_for(
        lambda: not any(_alive(p) for p in started),
        timeout=cluster.kill_wait + 5,
        what="every process of the cancelled job to end",
    )
    assert time.monotonic() - cancelled_at <= cluster.kill_wait + 5
    assert _final(cli, job_id) == "CANCELLED"
    assert ended("CANCELLED").outcome == "stopped"


def test_the_cluster_page_reads_slurms_nodes(cluster: SlurmCluster) -> None:
    [node] = cluster.cli.nodes()
    assert (node.name, node.cpus, node.partitions) == (cluster.node, 2, ("main",))


def test_an_unreachable_controller_is_named(cluster: SlurmCluster, tmp_path: Path) -> None:
    conf = cluster.conf.read_text()
    port = next(line for line in conf.splitlines() if line.startswith("SlurmctldPort="))
    dead = tmp_path / "slurm.conf"
    dead.write_text(conf.replace(port, "SlurmctldPort=1"))
    with pytest.raises(SlurmUnreachable):
        SlurmCli(conf=str(dead), timeout=20).queue("tb-")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.skipif(not accounting_installed(), reason="needs slurmdbd (.ci/run installs it)")
def test_sacct_allocated_cpu_hours_agree_with_the_runtime(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """With slurmdbd on the machine's MariaDB, sacct's AllocTRES x Elapsed is what ran."""
    with slurm_cluster(tmp_path_factory.mktemp("slurm-acct"), accounting=True) as accounted:
        cli = accounted.cli
        job_id = cli.submit(_batch("tb-t5-1-1", "srun sleep 4", tasks=2))
        assert _final(cli, job_id) == "COMPLETED"
        # slurmctld sends the job's end to slurmdbd a moment after the job ended
        record = wait_for(
            lambda: (r := cli.accounting([job_id]).get(job_id)) and r.state == "COMPLETED" and r,
            timeout=30,
            what="sacct's record of the end",
        )
        assert record.state == "COMPLETED" and record.tres["cpu"] == "2"
        runtime = cli.job(job_id)
        assert runtime is not None
        assert record.elapsed == runtime.elapsed  # both whole seconds of the same run
        expected = 2 * runtime.elapsed.total_seconds() / 3600
        assert record.allocated("cpu") == pytest.approx(expected, rel=0.01)


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    root = tmp_path_factory.mktemp("slurm-2h")
    root.chmod(0o755)
    with slurm_cluster(root, cpus=1, kill_wait=2, hosts=2) as running:
        yield running


def test_a_gang_across_two_hosts_starts_whole_on_both(two_hosts: SlurmCluster) -> None:
    cli = two_hosts.cli
    out = two_hosts.root / "gang.txt"
    body = f"srun sh -c 'echo $SLURM_PROCID $SLURMD_NODENAME >> {out}'"
    job_id = cli.submit(BatchRequest(name="tb-t6-1-1", script=f"#!/bin/sh\n{body}\n", nodes=2))
    assert _final(cli, job_id) == "COMPLETED"
    assert sorted(out.read_text().splitlines()) == ["0 h1", "1 h2"]
    record = cli.job(job_id)
    assert record is not None and record.nodes == ("h1", "h2")


def test_a_host_whose_link_goes_down_ends_its_job_as_the_platforms_fault(
    two_hosts: SlurmCluster,
) -> None:
    cli = two_hosts.cli
    script = "#!/bin/sh\nsrun sleep 300\n"
    job_id = cli.submit(BatchRequest(name="tb-t7-1-1", script=script, nodes=2))
    wait_for(
        lambda: (q := cli.queue("tb-t7-")).get(job_id) and q[job_id].state == "RUNNING",
        timeout=30,
        what="the two-host job to run",
    )
    two_hosts.cut("h2")
    state = str(
        wait_for(
            lambda: (j := cli.job(job_id)) and j.state not in ("RUNNING", "COMPLETING") and j.state,
            timeout=90,
            what="Slurm to notice the lost host",
        )
    )
    # NODE_FAIL when slurmctld notices first, FAILED when srun notices its lost task first
    assert state in ("NODE_FAIL", "FAILED")
    lost = wait_for(
        lambda: tuple(n.name for n in cli.nodes() if n.lost),
        timeout=60,
        what="the cut host to show as down",
    )
    assert lost == ("h2",)
    end = ended(state, lost_nodes=lost)
    assert end.outcome == "failed" and end.platform_fault  # a new attempt spends no restart
    assert "lost node h2" in end.reason
