"""The Slurm driver's parsers and state mapping on output recorded from Slurm 22.05 (Debian 12's
slurm-wlm, recorded by tests/slurm_cluster.py's cluster) and hand-checked edge cases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from backend.executors.slurm.cli import (
    SACCT_FIELDS,
    AccountedJob,
    BatchRequest,
    SlurmCli,
    expand_hostlist,
    gres_gpus,
    memory_kill,
    parse_duration,
    parse_sacct,
    parse_sacct_runs,
    parse_scontrol_jobs,
    parse_scontrol_nodes,
    parse_squeue,
    parse_time,
    parse_tres,
)
from backend.executors.slurm.executor import (
    REPORT_MARGIN,
    SUPERVISOR_GRACE,
    SlurmExecutor,
    manager_nodes,
)
from backend.executors.slurm.states import TERMINAL, ended, wait_reason
from workers.contract.protocol import AttemptOrder, StopRequest
from workers.contract.spec import JobSpec
from workers.node.settings import WorkerSettings

RECORDED = Path(__file__).parent / "slurm_recorded"


def recorded(release: str, name: str) -> str:
    return (RECORDED / release / name).read_text()


def test_squeue_2205_pending_reasons_running_nodes_and_tres() -> None:
    jobs = {job.name: job for job in parse_squeue(recorded("22.05", "squeue.txt"))}
    running, waiting, held = jobs["tb-dep1-1-1"], jobs["tb-dep1-2-1"], jobs["other"]
    assert (running.state, running.reason, running.nodes) == ("RUNNING", None, ("vm",))
    assert running.tres["cpu"] == "2"
    assert (waiting.state, waiting.reason, waiting.nodes) == ("PENDING", "Resources", ())
    assert wait_reason(waiting.reason).startswith("waiting for Slurm to free")
    assert held.reason == "JobHeldUser"
    assert all(job.restarts == 0 and job.partition == "main" for job in jobs.values())
    # StartTime as Unix seconds (SLURM_TIME_FORMAT=%s): the allocation's start, UTC
    assert running.start == datetime(2026, 11, 28, 22, 8, 28, tzinfo=UTC)
    assert held.start is None
    assert waiting.start is not None and waiting.start > running.start  # Slurm's estimate


def test_squeue_start_time_in_slurms_default_format_is_read_as_local_time() -> None:
    """Without SLURM_TIME_FORMAT (a wrapper that drops it), squeue prints the controller's
    local time; read as this machine's (recorded on a machine in UTC)."""
    by_epoch = {j.job_id: j.start for j in parse_squeue(recorded("22.05", "squeue.txt"))}
    local = parse_squeue(recorded("22.05", "squeue_local_time.txt"))
    running = next(j for j in local if j.state == "RUNNING")
    assert running.start is not None
    offset = running.start.astimezone().utcoffset() or timedelta()
    assert running.start + offset == by_epoch[running.job_id]
    assert parse_time("N/A") is None and parse_time("Unknown") is None


def test_scontrol_jobs_2205_terminal_states_map_to_outcomes() -> None:
    jobs = {job.job_id: job for job in parse_scontrol_jobs(recorded("22.05", "scontrol_jobs.txt"))}
    cancelled, completed, failed = jobs["1"], jobs["2"], jobs["4"]
    assert (cancelled.state, cancelled.signal) == ("CANCELLED", 15)
    assert ended(cancelled.state).outcome == "stopped"
    assert completed.elapsed == timedelta(seconds=5)
    assert ended(completed.state, exit_code=completed.exit_code).outcome == "succeeded"
    assert (failed.state, failed.exit_code, failed.reason) == ("FAILED", 3, "NonZeroExitCode")
    end = ended(failed.state, exit_code=failed.exit_code, reason=failed.reason)
    assert end.outcome == "failed" and "exit code 3" in end.reason


def test_a_job_record_keeps_every_field_after_a_key_with_a_colon() -> None:
    line = "JobId=9 JobName=x JobState=RUNNING Partition=main AllocNode:Sid=login:42 NodeList=vm"
    [job] = parse_scontrol_jobs(line)
    assert (job.partition, job.nodes) == ("main", ("vm",))


def test_lost_nodes() -> None:
    line = "NodeName=h2 CPUTot=1 CPUAlloc=0 State={} Partitions=main Reason=Not responding [root@x]"
    states = {"IDLE": False, "DOWN+NOT_RESPONDING": True, "IDLE*": True, "MIXED+DRAIN": False}
    for state, lost in states.items():
        [node] = parse_scontrol_nodes(line.format(state))
        assert node.lost is lost, state
    [node] = parse_scontrol_nodes(line.format("DOWN"))
    assert node.reason == "Not responding [root@x]"


def test_scontrol_nodes_2205() -> None:
    [node] = parse_scontrol_nodes(recorded("22.05", "scontrol_nodes.txt"))
    assert (node.name, node.cpus, node.partitions, node.gres) == ("vm", 2, ("main",), None)
    assert node.state in ("ALLOCATED", "MIXED")
    assert (node.cpus_allocated, node.health) == (2, "up")


@pytest.mark.parametrize(
    ("state", "health"),
    [
        ("IDLE", "up"),
        ("MIXED", "up"),
        ("ALLOCATED+COMPLETING", "up"),
        ("IDLE+DRAIN", "drained"),
        ("MIXED+DRAIN", "drained"),  # draining: its jobs run on, nothing new starts
        ("IDLE+RESERVED", "drained"),
        ("IDLE+POWERED_DOWN", "lost"),
        ("DOWN+NOT_RESPONDING", "lost"),
        ("IDLE*", "lost"),
        ("DOWN+DRAIN", "lost"),
    ],
)
def test_node_health_as_the_cluster_page_shows_it(state: str, health: str) -> None:
    [node] = parse_scontrol_nodes(f"NodeName=n1 CPUTot=4 CPUAlloc=1 State={state} Partitions=a")
    assert node.health == health


def test_the_cluster_pages_slurm_nodes_name_the_jobs_on_each() -> None:
    text = (
        "NodeName=gpu01 CPUTot=64 CPUAlloc=16 Gres=gpu:a100:8(S:0-1) State=MIXED "
        "Partitions=low,high\n"
        "NodeName=gpu02 CPUTot=64 CPUAlloc=0 Gres=gpu:8 State=IDLE+DRAIN Partitions=low "
        "Reason=bad fan [root@2026-11-28T10:00:00]\n"
        "NodeName=cpu01 CPUTot=8 CPUAlloc=0 Gres=(null) State=IDLE Partitions=other\n"
    )
    view = manager_nodes(parse_scontrol_nodes(text), {"gpu01": {7, 3}}, partition="low")
    assert [(n.name, n.health, n.gpus, n.jobs) for n in view] == [
        ("gpu01", "up", 8, [3, 7]),
        ("gpu02", "drained", 8, []),
    ]
    assert view[1].reason == "bad fan [root@2026-11-28T10:00:00]"
    assert [n.name for n in manager_nodes(parse_scontrol_nodes(text), {})] == [
        "gpu01",
        "gpu02",
        "cpu01",
    ]


def test_sacct_2205_allocation_lines_with_their_steps() -> None:
    jobs = {job.name: job for job in parse_sacct(recorded("22.05", "sacct.txt"))}
    assert set(jobs) == {"tb-dep1-1-1", "tb-dep1-2-1", "tb-dep1-3-1"}  # steps skipped
    done, failed, cancelled = jobs["tb-dep1-1-1"], jobs["tb-dep1-2-1"], jobs["tb-dep1-3-1"]
    assert (done.state, done.elapsed, done.tres["cpu"]) == ("COMPLETED", timedelta(seconds=3), "2")
    assert done.allocated("cpu") == pytest.approx(2 * 3 / 3600)
    assert (failed.state, failed.exit_code) == ("FAILED", 3)
    assert cancelled.state == "CANCELLED"  # "CANCELLED by 0"
    assert all(job.restarts == 0 and job.partition == "main" for job in jobs.values())


def test_sacct_allocation_lines_skip_steps_and_keep_the_last_run_of_a_requeued_job() -> None:
    text = (
        "17|tb-d-5-1|PREEMPTED|0:15|None|120|billing=8,cpu=8,gres/gpu=4,node=2|gpu[01-02]|low\n"
        "17.batch|batch|CANCELLED|0:15||120|cpu=4,gres/gpu=2,node=1|gpu01|\n"
        "17|tb-d-5-1|COMPLETED|0:0|None|3600|billing=8,cpu=8,gres/gpu=4,node=2|gpu[01-02]|low\n"
        "18|tb-d-6-1|CANCELLED by 0|0:0|None|30|cpu=2,node=1|n1|main\n"
    )
    jobs = {job.job_id: job for job in parse_sacct(text)}
    assert jobs["17"].state == "COMPLETED" and jobs["17"].restarts == 1
    assert jobs["17"].nodes == ("gpu01", "gpu02")
    assert jobs["17"].allocated("gres/gpu") == pytest.approx(4.0)  # 4 GPUs x 1 h
    assert jobs["18"].state == "CANCELLED"
    runs = [r for r in parse_sacct_runs(text) if r.job_id == "17"]
    assert [(r.state, r.restarts) for r in runs] == [("PREEMPTED", 0), ("COMPLETED", 1)]
    # what the job was allocated over both runs: 4 GPUs x (120 s + 3600 s)
    assert sum(r.allocated("gres/gpu") for r in runs) == pytest.approx(4 * 3720 / 3600)


#: sonar's sacct field order (tests/executors/slurm_recorded/24.x/README.md)
SONAR_SACCT_FIELDS = [
    "JobID",
    "JobIDRaw",
    "User",
    "Account",
    "State",
    "Start",
    "End",
    "AveCPU",
    "AveDiskRead",
    "AveDiskWrite",
    "AveRSS",
    "AveVMSize",
    "ElapsedRaw",
    "ExitCode",
    "Layout",
    "MaxRSS",
    "MaxVMSize",
    "MinCPU",
    "ReqCPUS",
    "ReqMem",
    "ReqNodes",
    "Reservation",
    "Submit",
    "Suspended",
    "SystemCPU",
    "TimelimitRaw",
    "UserCPU",
    "NodeList",
    "Partition",
    "AllocTRES",
    "Priority",
    "JobName",
]


def _in_our_field_order(text: str) -> str:
    """Recorded sacct lines of sonar's fields with Trainboard's SACCT_FIELDS picked out by
    name, in its order (a field sonar did not ask for, Reason, is empty)."""
    lines = []
    for line in text.splitlines():
        cells = dict(zip(SONAR_SACCT_FIELDS, line.split("|"), strict=True))
        lines.append("|".join(cells.get(name, "") for name in SACCT_FIELDS))
    return "\n".join(lines) + "\n"


def test_sacct_of_a_newer_release_running_and_pending_jobs_with_typed_gpus() -> None:
    runs = parse_sacct_runs(_in_our_field_order(recorded("24.x", "sacct_sonar_fields.txt")))
    jobs = {run.job_id: run for run in runs}
    assert list(jobs) == ["1879824", "1903070", "1902893"] and len(runs) == 3
    one_gpu, pending, four_gpus = jobs["1879824"], jobs["1903070"], jobs["1902893"]
    assert (one_gpu.state, one_gpu.name, one_gpu.nodes) == ("RUNNING", "siamE3F1", ("gpu-2",))
    # a typed GPU (gres/gpu:a100=1) beside the untyped count: the device resource is the count
    assert one_gpu.tres["gres/gpu"] == "1" and one_gpu.tres["gres/gpu:a100"] == "1"
    assert one_gpu.allocated("gres/gpu") == pytest.approx(1192379 / 3600)
    assert one_gpu.allocated("cpu") == pytest.approx(32 * 1192379 / 3600)
    assert (pending.state, pending.nodes, pending.tres) == ("PENDING", (), {})  # None assigned
    assert pending.allocated("gres/gpu") == 0.0
    assert four_gpus.allocated("gres/gpu") == pytest.approx(4 * 256072 / 3600)
    assert all(r.partition == "accel_long" and r.restarts == 0 for r in runs)
    assert all(r.exit_code == 0 and r.reason is None for r in runs)


def test_scontrol_jobs_of_a_newer_release_with_req_and_alloc_tres() -> None:
    jobs = parse_scontrol_jobs(recorded("24.x", "scontrol_jobs.txt"))
    assert [j.job_id for j in jobs] == ["1879824", "1903070", "2066283"]
    assert jobs[2].name == "OOD Code Server"  # a value with spaces, up to the next Key=
    for job in jobs:
        assert (job.state, job.reason, job.partition) == ("PENDING", "Priority", "accel")
        assert job.nodes == () and job.restarts == 0
        assert job.tres == {}  # AllocTRES=(null) while pending; ReqTRES is not what it holds
        assert wait_reason(job.reason).endswith("(Priority)")
    running = (
        "JobId=5 JobName=x JobState=RUNNING ReqTRES=cpu=8,gres/gpu=1 AllocTRES=cpu=8,gres/gpu=1"
    )
    assert parse_scontrol_jobs(running)[0].tres == {"cpu": "8", "gres/gpu": "1"}


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("vm", ("vm",)),
        ("gpu[01-03,07]", ("gpu01", "gpu02", "gpu03", "gpu07")),
        ("a[1-2],b3", ("a1", "a2", "b3")),
        ("rack[1-2]-n1", ("rack1-n1", "rack2-n1")),
        ("", ()),
        ("(null)", ()),
    ],
)
def test_hostlists(text: str, hosts: tuple[str, ...]) -> None:
    assert expand_hostlist(text) == hosts


def test_durations_and_tres() -> None:
    assert parse_duration("1-02:03:04") == timedelta(days=1, hours=2, minutes=3, seconds=4)
    assert parse_duration("05:06") == timedelta(minutes=5, seconds=6)
    assert parse_tres("N/A") == {}
    assert parse_tres("cpu=2,gres/gpu:a100=2") == {"cpu": "2", "gres/gpu:a100": "2"}


def test_every_terminal_state_has_an_outcome_with_slurms_reason() -> None:
    for state in TERMINAL:
        end = ended(state, exit_code=1, reason="SomeReason")
        assert end.reason.startswith("Slurm: ") and "SomeReason" in end.reason
    assert ended("NODE_FAIL").platform_fault and ended("NODE_FAIL").outcome == "failed"
    assert ended("PREEMPTED").preempted and ended("PREEMPTED").outcome == "stopped"
    assert ended("OUT_OF_MEMORY").out_of_memory
    assert ended("COMPLETED+").outcome == "succeeded"
    with pytest.raises(ValueError, match="not a terminal"):
        ended("RUNNING")


def test_2205_jobs_killed_for_memory_by_task_cgroup_map_to_out_of_memory() -> None:
    """Recorded on 22.05 with cgroup v1 memory limits (slurm_recorded/22.05/record_oom.py):
    a batch script over its memory ends the job OUT_OF_MEMORY; an srun step over it is the
    step's state, and the job, srun having exited 1, ends FAILED 1 (its attempt is then the
    supervisor's: it fails out of memory from the kernel's counters, workers/supervisor)."""
    jobs = {j.name: j for j in parse_scontrol_jobs(recorded("22.05", "scontrol_jobs_oom.txt"))}
    batch, step = jobs["batch-oom"], jobs["step-oom"]
    assert (batch.state, batch.reason, batch.exit_code, batch.signal) == (
        "OUT_OF_MEMORY",
        "OutOfMemory",
        0,
        125,
    )
    end = ended(batch.state, exit_code=batch.exit_code, signal=batch.signal, reason=batch.reason)
    assert (end.outcome, end.out_of_memory, end.platform_fault) == ("failed", True, False)
    assert end.reason == "Slurm: OUT_OF_MEMORY (OutOfMemory)"
    assert (step.state, step.exit_code) == ("FAILED", 1)
    runs = {run.name: run for run in parse_sacct_runs(recorded("22.05", "sacct_oom.txt"))}
    assert set(runs) == {"batch-oom", "step-oom"}  # the allocation lines, not the steps
    assert (runs["batch-oom"].state, runs["step-oom"].state) == ("OUT_OF_MEMORY", "FAILED")
    assert runs["batch-oom"].tres["mem"] == "300M"


def test_a_step_killed_over_its_memory_without_cgroups_reads_out_of_memory() -> None:
    """slurmstepd's OverMemoryKill (jobacct_gather, no cgroups) in a job's output, recorded
    on 22.05 (`sbatch --mem=300` of a step taking 400 MB): the job itself ended FAILED 137."""
    output = recorded("22.05", "memory_kill.out")
    words = memory_kill(output)
    assert words == "StepId=1.0 exceeded memory limit (382435328 > 314572800)"
    end = ended("FAILED", exit_code=137, reason="NonZeroExitCode", memory_kill=words)
    assert (end.outcome, end.out_of_memory, end.platform_fault) == ("failed", True, False)
    assert end.reason == f"Slurm: FAILED: {words}"
    assert memory_kill("srun: error: vm: task 0: Exited with exit code 1") is None
    # only a job that failed or was cancelled: a completed one did not die of it
    assert not ended("COMPLETED", memory_kill=words).out_of_memory


def test_batch_request_never_lets_slurm_requeue_unless_asked() -> None:
    args = BatchRequest(name="tb-d-1-1", script="#!/bin/sh\n", nodes=2, gpus_per_node=4).arguments()
    assert "--no-requeue" in args and "--gres=gpu:4" in args and "--nodes=2" in args
    assert not any(a.startswith("--partition") for a in args)  # the cluster's default partition


# -- GPU mode (#32): recorded on 22.05 with GPUs declared as GRES (tests/slurm_cluster.py's
# `gpus`, each a plain file: there is no GPU on this machine); typed a100 x2 + v100 x2 with
# accounting (AccountingStorageTRES=gres/gpu), untyped x4 without


def test_a_nodes_gpus_from_gres_typed_or_not_and_from_cfgtres() -> None:
    [typed] = parse_scontrol_nodes(recorded("22.05", "scontrol_nodes_gpus_typed.txt"))
    [untyped] = parse_scontrol_nodes(recorded("22.05", "scontrol_nodes_gpus_untyped.txt"))
    assert (typed.gres, typed.gpus, typed.tres["gres/gpu"]) == ("gpu:a100:2,gpu:v100:2", 4, "4")
    assert (untyped.gres, untyped.gpus, untyped.tres.get("gres/gpu")) == ("gpu:4", 4, None)
    assert all(n.gpus == 0 for n in parse_scontrol_nodes(recorded("22.05", "scontrol_nodes.txt")))
    # a node whose Gres is not shown, CfgTRES only (hand-made)
    [bare] = parse_scontrol_nodes("NodeName=g1 CPUTot=8 Gres=(null) CfgTRES=cpu=8,gres/gpu=8")
    assert bare.gpus == 8
    assert [m.gpus for m in manager_nodes([typed, untyped, bare], {})] == [4, 4, 8]


@pytest.mark.parametrize(
    ("gres", "count"),
    [
        ("gpu:8", 8),
        ("gpu:a100:4(S:0-1)", 4),
        ("gpu:a100:2(S:0,1),gpu:v100:2(S:1)", 4),  # a comma inside the socket list
        ("gpu:2,shard:8", 2),
        ("mps:100,gpu:1", 1),
        ("(null)", 0),
        ("", 0),
    ],
)
def test_gres_gpu_counts(gres: str, count: int) -> None:
    assert gres_gpus(gres) == count


def test_a_gpu_jobs_allocation_in_squeue_and_sacct() -> None:
    jobs = parse_squeue(recorded("22.05", "squeue_gpus.txt"))
    # one asked --gres=gpu:2, the other --gpus-per-node=2: the same allocation
    assert [(j.tres["cpu"], j.tres["gres/gpu"]) for j in jobs] == [("1", "2"), ("1", "2")]
    runs = parse_sacct_runs(recorded("22.05", "sacct_gpus.txt"))
    assert [r.allocated("gres/gpu") for r in runs] == [2 * 2 / 3600] * 2  # 2 GPUs x 2 s


def _executor(redis_url: str, data_dir: Path, **options: Any) -> SlurmExecutor:
    """An executor on this test's Redis whose cli reaches no cluster (nothing here calls it)."""
    client = redis.Redis.from_url(redis_url)
    return SlurmExecutor(
        client=client, cli=SlurmCli(), data_dir=data_dir, api_url="http://127.0.0.1:1", **options
    )


def test_gpu_mode_follows_the_partitions_nodes_unless_the_operator_said(
    redis_url: str, tmp_path: Path
) -> None:
    gpu_nodes = parse_scontrol_nodes(recorded("22.05", "scontrol_nodes_gpus_typed.txt"))
    cpu_nodes = parse_scontrol_nodes(recorded("22.05", "scontrol_nodes.txt"))

    def executor(gpus: bool | None, partition: str | None = None) -> SlurmExecutor:
        return _executor(redis_url, tmp_path, partition=partition, gpus=gpus)

    auto = executor(None)
    assert not auto.gpus  # until Slurm's nodes are read
    auto._decide_gpus(gpu_nodes)
    assert auto.gpus
    auto._decide_gpus(cpu_nodes)
    assert not auto.gpus
    elsewhere = executor(None, partition="cpu-only")  # the GPU node is not in it
    elsewhere._decide_gpus(gpu_nodes)
    assert not elsewhere.gpus
    forced = executor(False)
    forced._decide_gpus(gpu_nodes)
    assert not forced.gpus
    # in GPU mode an attempt asks each node for its devices as GPUs, sbatch and srun alike
    auto._decide_gpus(gpu_nodes)
    spec = JobSpec.model_validate(
        {
            "name": "g",
            "template": "mlp",
            "parallelism": {"strategy": "data", "devices": 4, "nodes": 2},
        }
    )
    gang = [
        AttemptOrder(
            attempt_id=5,
            job_id=3,
            number=1,
            node=f"slurm-{r}",
            devices=[0, 1],
            node_rank=r,
            nnodes=2,
            spec=spec,
        )
        for r in (0, 1)
    ]
    request = auto._request(gang)
    args = request.arguments()
    assert {"--nodes=2", "--cpus-per-task=1", "--gres=gpu:2"} <= set(args)
    assert "--gres=gpu:2" in request.script.split("srun", 1)[1]
    assert not any("gpus-per-node" in a for a in [*args, request.script])


# -- Slurm 24.11.5 (Debian 13's), recorded here in a trixie chroot by
# slurm_recorded/24.11/record.sh with Trainboard's own commands (its README says how)


def test_squeue_2411_running_pending_held_and_a_name_with_spaces() -> None:
    jobs = {job.job_id: job for job in parse_squeue(recorded("24.11", "squeue.txt"))}
    running, waiting, held = jobs["21"], jobs["22"], jobs["23"]
    assert (running.name, running.state, running.reason) == ("tb-dep1-1-1", "RUNNING", None)
    assert (running.nodes, running.node_count, running.tres["cpu"]) == (("vm",), 1, "2")
    assert running.start == datetime(2026, 11, 29, 1, 51, 29, tzinfo=UTC)  # SLURM_TIME_FORMAT=%s
    assert (waiting.state, waiting.reason, waiting.nodes) == ("PENDING", "Resources", ())
    assert wait_reason(waiting.reason).startswith("waiting for Slurm to free")
    assert waiting.start is not None and waiting.start > running.start  # Slurm's estimate
    assert (held.name, held.reason, held.start) == ("other team job", "JobHeldUser", None)
    assert all(job.restarts == 0 and job.partition == "main" for job in jobs.values())
    # the default time format is the controller's local time, read as this machine's
    local = {
        job.job_id: job.start for job in parse_squeue(recorded("24.11", "squeue_local_time.txt"))
    }
    started = local["21"]
    assert started is not None
    assert started + (started.astimezone().utcoffset() or timedelta()) == running.start


def test_squeue_2411_a_requeued_job_waits_with_its_restart_count() -> None:
    """What the executor's fence reads (a live attempt's job with RestartCnt > 0 is
    scancelled): `scontrol requeue` put job 32 back, held until its BeginTime."""
    jobs = {job.job_id: job for job in parse_squeue(recorded("24.11", "squeue_requeued.txt"))}
    requeued = jobs["32"]
    assert (requeued.state, requeued.reason, requeued.restarts) == ("PENDING", "BeginTime", 1)
    assert wait_reason(requeued.reason) == "waiting for its start time (BeginTime)"
    assert jobs["31"].restarts == 0


def test_squeue_2411_gpus_in_tres_alloc() -> None:
    jobs = parse_squeue(recorded("24.11", "squeue_gpus.txt"))
    # --gres=gpu:2 and --gpus-per-node=v100:1: the count under gres/gpu either way
    assert [(j.tres["cpu"], j.tres["gres/gpu"]) for j in jobs] == [("1", "2"), ("1", "1")]


@pytest.mark.parametrize(
    ("name", "state", "health", "allocated"),
    [
        ("scontrol_nodes_allocated.txt", "ALLOCATED", "up", 2),
        ("scontrol_nodes_planned.txt", "MIXED+PLANNED", "up", 1),  # backfill holds it for a job
        ("scontrol_nodes_draining.txt", "ALLOCATED+DRAIN", "drained", 2),
        ("scontrol_nodes_down.txt", "DOWN+NOT_RESPONDING", "lost", 0),
        ("scontrol_nodes_invalid.txt", "DOWN+INVALID_REG", "lost", 0),
    ],
)
def test_scontrol_nodes_2411_states_as_the_cluster_page_shows_them(
    name: str, state: str, health: str, allocated: int
) -> None:
    """24.11 prints ResumeAfterTime=, an empty AllocTRES= on an idle node and no
    ExtSensors* fields; the state flags are joined with + as in 22.05."""
    [node] = parse_scontrol_nodes(recorded("24.11", name))
    assert (node.name, node.state, node.health) == ("vm", state, health)
    assert (node.cpus_allocated, node.partitions, node.gpus) == (allocated, ("main",), 4)
    assert node.gres == "gpu:a100:2,gpu:v100:2" and node.tres["gres/gpu"] == "4"
    assert node.lost is (health == "lost")


def test_scontrol_nodes_2411_reasons_with_spaces_and_brackets() -> None:
    [drained] = parse_scontrol_nodes(recorded("24.11", "scontrol_nodes_draining.txt"))
    assert drained.reason == "bad fan [rec] [root@2026-11-29T01:51:34]"
    [down] = parse_scontrol_nodes(recorded("24.11", "scontrol_nodes_down.txt"))
    assert down.reason == "Not responding [root@2026-11-29T01:55:23]"
    [invalid] = parse_scontrol_nodes(recorded("24.11", "scontrol_nodes_invalid.txt"))
    assert invalid.cpus == 4  # as slurm.conf says; the machine registered 2
    assert invalid.reason == "Low socket*core*thread count, Low CPUs [root@2026-11-29T01:55:47]"
    view = manager_nodes([drained, down, invalid], {"vm": {7}})
    assert [(n.health, n.jobs) for n in view] == [("drained", [7]), ("lost", [7]), ("lost", [7])]


def test_scontrol_jobs_2411_every_way_a_job_ended_maps_to_an_outcome() -> None:
    jobs = {j.job_id: j for j in parse_scontrol_jobs(recorded("24.11", "scontrol_jobs_ended.txt"))}
    [lost] = parse_scontrol_jobs(recorded("24.11", "scontrol_jobs_node_fail.txt"))
    done, failed, cancelled, late, requeued = (jobs[i] for i in ("28", "29", "30", "31", "32"))
    named = {"done": done, "failed": failed, "cancelled": cancelled}
    named |= {"late": late, "requeued": requeued, "lost": lost}
    outcome = {
        key: ended(j.state, exit_code=j.exit_code, signal=j.signal, reason=j.reason)
        for key, j in named.items()
    }
    assert (done.state, done.elapsed, outcome["done"].outcome) == (
        "COMPLETED",
        timedelta(seconds=2),
        "succeeded",
    )
    assert (failed.exit_code, failed.reason) == (3, "NonZeroExitCode")
    assert outcome["failed"].reason == "Slurm: FAILED, exit code 3 (NonZeroExitCode)"
    assert (cancelled.signal, outcome["cancelled"].outcome) == (15, "stopped")
    assert (late.state, late.reason, late.signal) == ("TIMEOUT", "TimeLimit", 15)
    assert outcome["late"].reason == "Slurm: TIMEOUT: the job reached its time limit (TimeLimit)"
    assert (requeued.state, requeued.restarts, outcome["requeued"].outcome) == (
        "COMPLETED",
        1,
        "succeeded",
    )
    assert (lost.state, lost.reason, lost.nodes) == ("NODE_FAIL", "NodeDown", ("vm",))
    assert (
        outcome["lost"].platform_fault and outcome["lost"].reason == "Slurm: NODE_FAIL (NodeDown)"
    )
    # AllocTRES= (22.05 printed TRES=) is what the job holds; ReqTRES= what it asked
    assert cancelled.tres == {"cpu": "2", "node": "1", "billing": "2"}


def test_scontrol_jobs_2411_queue_and_gpus() -> None:
    queue = {j.job_id: j for j in parse_scontrol_jobs(recorded("24.11", "scontrol_jobs_queue.txt"))}
    assert (queue["21"].state, queue["21"].tres["cpu"]) == ("RUNNING", "2")
    assert (queue["22"].reason, queue["22"].tres) == ("Resources", {})  # AllocTRES=(null)
    assert queue["23"].name == "other team job"
    gpus = parse_scontrol_jobs(recorded("24.11", "scontrol_jobs_gpus.txt"))
    assert [j.tres["gres/gpu"] for j in gpus] == ["2", "1"]


def test_sacct_2411_runs_steps_and_a_requeued_jobs_two_runs() -> None:
    allocations = parse_sacct_runs(recorded("24.11", "sacct.txt"))
    assert allocations == parse_sacct_runs(recorded("24.11", "sacct_with_steps.txt"))
    runs: dict[str, list[AccountedJob]] = {}
    for run in allocations:
        runs.setdefault(run.job_id, []).append(run)
    states = {job_id: [r.state for r in each] for job_id, each in runs.items()}
    assert states == {
        "26": ["CANCELLED"],  # "CANCELLED by 0"
        "27": ["CANCELLED"],
        "28": ["COMPLETED"],
        "29": ["FAILED"],
        "30": ["CANCELLED"],
        "31": ["TIMEOUT"],
        "32": ["REQUEUED", "COMPLETED"],  # --duplicates: each run of the requeued job
    }
    first, second = runs["32"]
    assert (first.restarts, second.restarts) == (0, 1)
    # what the requeued job was allocated over both runs: 1 CPU x (3 s + 21 s)
    assert sum(r.allocated("cpu") for r in runs["32"]) == pytest.approx(24 / 3600)
    # sacct's Reason is the last reason it was blocked (BeginTime, after the requeue), not
    # why the run ended: a run that got nodes has none
    assert second.reason is None and ended(second.state).outcome == "succeeded"
    assert runs["29"][0].exit_code == 3
    assert [runs[g][0].allocated("gres/gpu") for g in ("26", "27")] == [2 * 2 / 3600, 2 / 3600]
    [lost] = parse_sacct_runs(recorded("24.11", "sacct_node_fail.txt"))
    assert (lost.state, lost.exit_code, lost.elapsed) == ("NODE_FAIL", 1, timedelta(seconds=27))
    assert ended(lost.state, exit_code=lost.exit_code).platform_fault


def test_sacct_keeps_the_reason_of_a_run_that_never_got_nodes() -> None:
    """Hand-made in 22.05's form (the reason a held job was cancelled is worth showing)."""
    text = "40|tb-d-9-1|CANCELLED by 0|0:0|JobHeldAdmin|0||None assigned|main\n"
    [run] = parse_sacct_runs(text)
    assert (run.state, run.reason, run.nodes) == ("CANCELLED", "JobHeldAdmin", ())


def test_a_stopped_jobs_scancel_waits_out_the_grace_its_supervisors_give(
    redis_url: str, tmp_path: Path
) -> None:
    """The executor scancels a stopped attempt's Slurm job still running after the grace the
    supervisors give the ranks' final checkpoint (the TRAINBOARD_* setting it hands them)
    plus a margin: a fixed 30 s before, which cut a save that a longer grace still allowed."""

    def executor(env: dict[str, str]) -> SlurmExecutor:
        return _executor(redis_url, tmp_path, step_env=env)

    defaults = executor({})
    assert defaults.grace(StopRequest.pause) == defaults.grace(StopRequest.cancel) == 30.0
    assert defaults.grace(StopRequest.preempt) == 60.0 + REPORT_MARGIN
    longer = executor({"TRAINBOARD_STOP_GRACE_SECONDS": "120"})
    assert longer.grace(StopRequest.pause) == 120.0 + REPORT_MARGIN
    assert longer.grace(StopRequest.preempt) == 60.0 + REPORT_MARGIN
    # the defaults assumed are the steps' own (workers/node/settings.py)
    fields = WorkerSettings.model_fields
    for action, (setting, default) in SUPERVISOR_GRACE.items():
        name = setting.removeprefix("TRAINBOARD_").lower()
        assert fields[name].default == default, action
