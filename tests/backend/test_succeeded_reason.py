"""A job that succeeds on a later attempt keeps no earlier attempt's failure as its reason."""

from __future__ import annotations

from backend.jobs.models import Job
from backend.jobs.states import JobState, transition

TRACEBACK = "Traceback (most recent call last):\n  ...\nRuntimeError: rank 1 died"


def test_success_clears_the_reason_an_earlier_attempt_left() -> None:
    job = Job(id=1, state=JobState.running.value, reason=TRACEBACK)
    transition(job, JobState.restarting, reason=TRACEBACK)
    assert job.reason == TRACEBACK  # while it restarts, the reason says why
    transition(job, JobState.queued)
    job.reason = TRACEBACK  # as a restart that keeps its cause on the queued job would
    for to in (JobState.scheduled, JobState.running, JobState.succeeded):
        transition(job, to)
    assert job.state == "succeeded" and job.reason is None and job.finished_at is not None


def test_a_failure_keeps_its_reason() -> None:
    job = Job(id=2, state=JobState.running.value)
    transition(job, JobState.failed, reason=TRACEBACK)
    assert job.reason == TRACEBACK
