"""The Slurm driver's parsers and state mapping on output recorded from Slurm 22.05 (Debian 12's
slurm-wlm, recorded by tests/slurm_cluster.py's cluster) and hand-checked edge cases."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from backend.executors.slurm.cli import (
    BatchRequest,
    expand_hostlist,
    parse_duration,
    parse_sacct,
    parse_scontrol_jobs,
    parse_scontrol_nodes,
    parse_squeue,
    parse_tres,
)
from backend.executors.slurm.states import TERMINAL, ended, wait_reason

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


def test_batch_request_never_lets_slurm_requeue_unless_asked() -> None:
    args = BatchRequest(name="tb-d-1-1", script="#!/bin/sh\n", nodes=2, gpus_per_node=4).arguments()
    assert "--no-requeue" in args and "--gpus-per-node=4" in args and "--nodes=2" in args
    assert not any(a.startswith("--partition") for a in args)  # the cluster's default partition
