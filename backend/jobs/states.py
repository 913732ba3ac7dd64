"""The job state machine: one table of allowed transitions, one function that applies it."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from backend.db import utcnow
from backend.jobs.models import Job, JobEvent


class JobState(StrEnum):
    queued = "queued"
    scheduled = "scheduled"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"
    paused = "paused"
    cancelling = "cancelling"
    pausing = "pausing"
    restarting = "restarting"


S = JobState
FINAL = frozenset({S.succeeded, S.failed, S.cancelled})
STOPPED = FINAL | {S.paused}
ACTIVE = frozenset({S.scheduled, S.running, S.cancelling, S.pausing})

TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    S.queued: frozenset({S.scheduled, S.cancelled, S.paused}),
    S.scheduled: frozenset(
        {
            S.running,
            S.cancelling,
            S.pausing,
            S.cancelled,
            S.paused,
            S.restarting,
            S.failed,
            S.queued,
        }
    ),
    S.running: frozenset({S.succeeded, S.failed, S.cancelling, S.pausing, S.restarting}),
    S.cancelling: frozenset({S.cancelled, S.succeeded, S.failed}),
    S.pausing: frozenset({S.paused, S.cancelling, S.succeeded, S.failed}),
    # waiting out its restart back-off (`jobs.restart_at`), then queued again
    S.restarting: frozenset({S.queued, S.cancelled, S.paused, S.failed}),
    S.paused: frozenset({S.queued, S.cancelled}),
    S.failed: frozenset({S.queued}),
    S.cancelled: frozenset({S.queued}),
    S.succeeded: frozenset(),
}


class IllegalTransition(ValueError):
    """A state change the table does not allow (e.g. cancelling a finished job)."""


def transition(
    job: Job,
    to: JobState,
    *,
    message: str = "",
    reason: str | None = None,
    attempt_id: int | None = None,
) -> JobEvent:
    """Move job to state `to` (or raise IllegalTransition) and return the timeline event."""
    current = JobState(job.state)
    if to not in TRANSITIONS[current]:
        raise IllegalTransition(f"job {job.id} is {current.value}; it cannot become {to.value}")
    now: datetime = utcnow()
    job.state = to.value
    if reason is not None:
        job.reason = reason
    if to is S.running and job.started_at is None:
        job.started_at = now
    if to in STOPPED:
        job.finished_at = now
        job.stop_request = None
    elif to is S.queued:
        job.finished_at = None
        job.reason = reason
    return JobEvent(
        job_id=job.id, attempt_id=attempt_id, kind=to.value, message=message or to.value, time=now
    )
