"""The supervisor entry Slurm starts (workers/node/slurm_step.py): its restart fence."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.node import slurm_step

RECORDED = Path(__file__).parent / "slurm_recorded"


def test_a_requeued_run_of_an_attempts_slurm_job_claims_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Trainboard owns restarts: (Slurm job id, restart 0) is the attempt's only run. A run
    Slurm requeued (an operator's `scontrol requeue`) exits 0 before it reads its orders,
    so it neither claims the slice nor reports an outcome for the attempt."""
    monkeypatch.setenv("SLURM_JOB_ID", "41")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    # no step.json in the folder: reading the orders would raise
    assert slurm_step.main([str(tmp_path)]) == 0
    assert "Slurm job 41 was requeued (restart 1): not this attempt's run" in caplog.text


def test_the_first_run_reads_its_orders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "41")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "0")
    with pytest.raises(FileNotFoundError, match="step.json"):
        slurm_step.main([str(tmp_path)])


def test_preemption_is_read_from_the_controller_and_unknown_without_one() -> None:
    """No controller answers here (no SLURM_CONF cluster): a SIGTERM then counts as
    before, never as a preemption."""
    assert slurm_step.preempted("") is None
    assert slurm_step.preempted("41", timeout=1) is None
    found = slurm_step.PREEMPT_TIME.search(
        "JobId=1 PreemptEligibleTime=x PreemptTime=2026-11-28T18:11:18"
    )
    assert found is not None and found.group(1) == "2026-11-28T18:11:18"


def test_slurms_time_limit_is_read_from_the_jobs_record_at_the_sigterm() -> None:
    """What `scontrol show job` said of a job at the SIGTERM of its time limit (recorded on
    22.05, from inside the step): JobState COMPLETING, Reason=TimeLimit."""
    record = (RECORDED / "22.05" / "scontrol_job_time_limit.txt").read_text()
    assert "JobState=COMPLETING Reason=TimeLimit" in record
    assert slurm_step.timed_out("2", record) == (
        "Slurm: TIMEOUT: Slurm job 2 reached its time limit (TimeLimit=00:01:00)"
    )
    assert slurm_step.preempted("2", record=record) is None
    running = record.replace("JobState=COMPLETING Reason=TimeLimit", "JobState=RUNNING Reason=None")
    assert slurm_step.timed_out("2", running) is None
    assert slurm_step.timed_out("2", "") is None  # the controller did not answer
