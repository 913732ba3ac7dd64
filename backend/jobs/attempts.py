"""The worker side of an attempt's life: claim it exactly once, report how it ended."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from backend.db import utcnow
from backend.jobs.models import Attempt, Job
from backend.jobs.states import JobState, transition
from workers.protocol import AttemptOutcome


class AttemptNotFound(LookupError):
    pass


def claim(session: Session, *, attempt_id: int, node: str) -> bool:
    """Compare-and-set scheduled → running; a duplicate, late or stale claim gets False."""
    attempt = session.get(Attempt, attempt_id)
    if attempt is None:
        raise AttemptNotFound(f"attempt {attempt_id} not found")
    job = session.get_one(Job, attempt.job_id)
    if job.attempt != attempt.number or job.state != JobState.scheduled.value:
        return False
    won = session.execute(
        update(Attempt)
        .where(Attempt.id == attempt_id, Attempt.state == "scheduled", Attempt.node_name == node)
        .values(state="running", claimed_at=utcnow())
    ).rowcount  # type: ignore[attr-defined]
    if not won:
        session.rollback()
        return False
    session.add(
        transition(
            job,
            JobState.running,
            message=f"attempt {attempt.number} started on {node} devices {attempt.devices}",
            attempt_id=attempt.id,
        )
    )
    session.commit()
    return True


def finish(session: Session, *, attempt_id: int, outcome: AttemptOutcome) -> Job:
    """Record how an attempt ended and move its job on: done, stopped, restarted or failed."""
    attempt = session.get(Attempt, attempt_id)
    if attempt is None:
        raise AttemptNotFound(f"attempt {attempt_id} not found")
    job = session.get_one(Job, attempt.job_id)
    if attempt.state != "running":
        return job  # a repeated report: the first one already decided
    attempt.state = outcome.outcome
    attempt.finished_at = utcnow()
    attempt.exit_reason = outcome.reason
    attempt.last_checkpoint = outcome.last_checkpoint or attempt.last_checkpoint
    if job.attempt == attempt.number:
        _advance_job(session, job, attempt, outcome)
    session.commit()
    return job


def _advance_job(session: Session, job: Job, attempt: Attempt, outcome: AttemptOutcome) -> None:
    def move(to: JobState, message: str, reason: str | None = None) -> None:
        session.add(transition(job, to, message=message, reason=reason, attempt_id=attempt.id))

    if outcome.outcome == "succeeded":
        move(JobState.succeeded, f"attempt {attempt.number} finished all steps")
    elif job.stop_request == "cancel":
        move(JobState.cancelled, f"attempt {attempt.number} stopped", reason="cancelled by user")
    elif job.stop_request == "pause":
        move(JobState.paused, f"attempt {attempt.number} paused", reason="paused by user")
    else:
        restart_or_fail(
            session, job, reason=outcome.reason or "ranks stopped", attempt_id=attempt.id
        )


def restart_or_fail(session: Session, job: Job, *, reason: str, attempt_id: int | None) -> None:
    """Queue a new attempt from the newest checkpoint while max_restarts allows, else fail."""
    max_restarts = int(job.spec.get("max_restarts", 0))
    if job.restarts < max_restarts:
        session.add(transition(job, JobState.restarting, message=reason, attempt_id=attempt_id))
        job.restarts += 1
        session.add(
            transition(
                job,
                JobState.queued,
                message=f"restart {job.restarts} of {max_restarts} after: {reason}",
                reason=reason,
            )
        )
    else:
        session.add(
            transition(job, JobState.failed, message=reason, reason=reason, attempt_id=attempt_id)
        )


def newest_checkpoint(session: Session, job_id: int) -> str | None:
    """The newest checkpoint any attempt of the job left, to resume from."""
    return session.scalars(
        select(Attempt.last_checkpoint)
        .where(Attempt.job_id == job_id, Attempt.last_checkpoint.is_not(None))
        .order_by(Attempt.number.desc())
    ).first()
