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
    #: ended by a sweep's early-stopping rule (a poor trial), not by a failure or a user
    stopped = "stopped"


S = JobState
FINAL = frozenset({S.succeeded, S.failed, S.cancelled, S.stopped})
STOPPED = FINAL | {S.paused}


class JobPhase(StrEnum):
    """The group a state belongs to, as the board and every list show it (the browser
    keeps no copy of these groups)."""

    waiting = "waiting"  # queued: not placed yet
    active = "active"  # placed, running, stopping, or restarting after a back-off
    paused = "paused"  # stopped with a checkpoint; resumable
    finished = "finished"  # a final state


PHASES: dict[JobState, JobPhase] = {
    S.queued: JobPhase.waiting,
    S.scheduled: JobPhase.active,
    S.running: JobPhase.active,
    S.cancelling: JobPhase.active,
    S.pausing: JobPhase.active,
    S.restarting: JobPhase.active,
    S.paused: JobPhase.paused,
    **{state: JobPhase.finished for state in FINAL},
}

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
    # paused: its ranks paused it by the job's own policy (a checkpoint found a full disk)
    S.running: frozenset({S.succeeded, S.failed, S.cancelling, S.pausing, S.restarting, S.paused}),
    S.cancelling: frozenset({S.cancelled, S.stopped, S.succeeded, S.failed}),
    # queued: a preempted job's attempt ended (`backend.jobs.preempt`)
    S.pausing: frozenset({S.paused, S.cancelling, S.succeeded, S.failed, S.queued}),
    # waiting out its restart back-off (`jobs.restart_at`), then queued again
    S.restarting: frozenset({S.queued, S.cancelled, S.paused, S.failed}),
    S.paused: frozenset({S.queued, S.cancelled}),
    S.failed: frozenset({S.queued}),
    S.cancelled: frozenset({S.queued}),
    S.stopped: frozenset({S.queued}),
    S.succeeded: frozenset(),
}


class JobAction(StrEnum):
    """What a user may ask of a job; which ones a state allows follows from TRANSITIONS."""

    cancel = "cancel"
    pause = "pause"
    resume = "resume"
    clone = "clone"


#: where a cancel or pause takes effect at once (no rank runs); elsewhere ranks are asked first
STOPS_AT_ONCE = frozenset({S.queued, S.paused, S.restarting})
STOPS_BY_ASKING = frozenset({S.scheduled, S.running, S.pausing})


def cancelled_state(job: Job) -> JobState:
    """Where a cancel ends: `stopped` when a sweep's early-stopping rule asked for it."""
    return S.stopped if job.early_stop else S.cancelled


def stop_target(state: JobState, action: JobAction) -> JobState | None:
    """The state a cancel or pause moves a job to (at once, or via -ing); None if refused."""
    final, via = (
        (S.cancelled, S.cancelling) if action is JobAction.cancel else (S.paused, S.pausing)
    )
    if state in STOPS_AT_ONCE and final in TRANSITIONS[state]:
        return final
    if state in STOPS_BY_ASKING and via in TRANSITIONS[state]:
        return via
    return None


def allowed_actions(state: JobState) -> list[JobAction]:
    """The actions a job in `state` accepts (the UI offers exactly these)."""
    actions = [a for a in (JobAction.cancel, JobAction.pause) if stop_target(state, a)]
    if state in STOPPED and S.queued in TRANSITIONS[state]:
        actions.append(JobAction.resume)  # from its newest checkpoint (409 if it has none)
    actions.append(JobAction.clone)
    return actions


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
    if to is S.succeeded:  # an earlier attempt's failure is no reason of a job that succeeded
        job.reason = reason
    elif to is S.queued:
        job.finished_at = None
        job.reason = reason
        job.stop_request = None
    return JobEvent(
        job_id=job.id, attempt_id=attempt_id, kind=to.value, message=message or to.value, time=now
    )
