"""The worker side of an attempt's life: each node claims its slice once, then reports its end.

An attempt is a gang spread over one slice per node. It runs once the first slice is
claimed, fails as soon as one slice fails (the others are told to stop), and succeeds
when every slice has succeeded.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import redis
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from backend.db import utcnow
from backend.jobs.models import Attempt, AttemptSlice, Job
from backend.jobs.states import JobState, transition
from backend.nodes.models import Node
from backend.nodes.trust import accepted_checkpoint, refusal
from backend.signals import request_stop
from workers.contract.protocol import AttemptOutcome

LIVE_SLICE_STATES = ("scheduled", "running")
log = logging.getLogger(__name__)


class AttemptNotFound(LookupError):
    pass


def slices_of(session: Session, attempt_id: int) -> Sequence[AttemptSlice]:
    return session.scalars(
        select(AttemptSlice)
        .where(AttemptSlice.attempt_id == attempt_id)
        .order_by(AttemptSlice.node_rank)
    ).all()


def attempt_on(session: Session, *, attempt_id: int, node: str) -> Attempt:
    """The attempt, if one of its slices is on `node`; AttemptNotFound otherwise (no probing)."""
    attempt = session.get(Attempt, attempt_id)
    if attempt is None or not any(s.node_name == node for s in slices_of(session, attempt_id)):
        raise AttemptNotFound(f"attempt {attempt_id} not found")
    return attempt


def claim(session: Session, *, attempt_id: int, node: str) -> bool:
    """Compare-and-set this node's slice scheduled → running; duplicates and stale claims lose."""
    attempt = attempt_on(session, attempt_id=attempt_id, node=node)
    job = session.get_one(Job, attempt.job_id)
    if job.attempt != attempt.number or attempt.state not in LIVE_SLICE_STATES:
        return False
    if attempt.state == "scheduled" and job.state != JobState.scheduled.value:
        return False
    won = session.execute(
        update(AttemptSlice)
        .where(
            AttemptSlice.attempt_id == attempt_id,
            AttemptSlice.node_name == node,
            AttemptSlice.state == "scheduled",
        )
        .values(state="running", claimed_at=utcnow())
    ).rowcount  # type: ignore[attr-defined]
    if not won:
        session.rollback()
        return False
    first = session.execute(
        update(Attempt)
        .where(Attempt.id == attempt_id, Attempt.state == "scheduled")
        .values(state="running", claimed_at=utcnow())
    ).rowcount  # type: ignore[attr-defined]
    if first:
        session.add(
            transition(
                job,
                JobState.running,
                message=f"attempt {attempt.number} started on "
                f"{placement_text(session, attempt_id)}",
                attempt_id=attempt.id,
            )
        )
    session.commit()
    return True


def finish(
    session: Session,
    client: redis.Redis,
    *,
    attempt_id: int,
    node: str,
    outcome: AttemptOutcome,
) -> Job:
    """Record how `node`'s slice ended and, once that decides the attempt, move the job on."""
    attempt = attempt_on(session, attempt_id=attempt_id, node=node)
    job = session.get_one(Job, attempt.job_id)
    slices = slices_of(session, attempt_id)
    reported = [s for s in slices if s.node_name == node and s.state == "running"]
    if not reported:
        return job  # a repeated or late report: the first one already counted
    reported[0].state = outcome.outcome
    reported[0].finished_at = utcnow()
    data_dir = session.scalars(select(Node.data_dir).where(Node.name == node)).first()
    checkpoint = accepted_checkpoint(
        outcome.last_checkpoint, data_dir=data_dir, job_id=job.id, node=node
    )
    if checkpoint:
        attempt.last_checkpoint = checkpoint
    if attempt.state != "running":
        session.commit()
        return job
    if outcome.outcome == "succeeded" and any(s.state != "succeeded" for s in slices):
        session.commit()
        return job  # the other nodes' ranks are still finishing
    attempt.state = outcome.outcome
    attempt.finished_at = utcnow()
    attempt.exit_reason = outcome.reason
    if any(s.state in LIVE_SLICE_STATES for s in slices):
        request_stop(client, attempt_id=attempt.id, action="cancel")
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


def end_attempt(
    session: Session, client: redis.Redis, attempt: Attempt, *, state: str, reason: str
) -> None:
    """End an attempt from the control plane (node lost, slice never claimed) and move its job."""
    attempt.state = state
    attempt.finished_at = utcnow()
    attempt.exit_reason = reason
    live = [s for s in slices_of(session, attempt.id) if s.state in LIVE_SLICE_STATES]
    for part in live:
        if part.state == "scheduled":
            part.state = "withdrawn"
    if any(s.state == "running" for s in live):
        request_stop(client, attempt_id=attempt.id, action="cancel")
    job = session.get_one(Job, attempt.job_id)
    if job.attempt != attempt.number:
        return
    if job.state == JobState.scheduled.value and state == "withdrawn":
        session.add(transition(job, JobState.queued, message=reason, attempt_id=attempt.id))
    elif job.stop_request == "cancel":
        session.add(transition(job, JobState.cancelled, message=reason, attempt_id=attempt.id))
    elif job.stop_request == "pause":
        session.add(transition(job, JobState.paused, message=reason, attempt_id=attempt.id))
    else:
        restart_or_fail(session, job, reason=reason, attempt_id=attempt.id)


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


def newest_checkpoints(session: Session, job_ids: Sequence[int]) -> dict[int, str]:
    """The newest checkpoint of each job that lies in its own dir on a node it ran on."""
    rows = session.execute(
        select(Attempt.job_id, Attempt.id, Attempt.last_checkpoint, Node.data_dir)
        .join(AttemptSlice, AttemptSlice.attempt_id == Attempt.id)
        .outerjoin(Node, Node.name == AttemptSlice.node_name)
        .where(Attempt.job_id.in_(job_ids), Attempt.last_checkpoint.is_not(None))
        .order_by(Attempt.job_id, Attempt.number)
    ).all()
    accepted: dict[int, tuple[int, str]] = {}  # attempt id: (job id, path), oldest first
    refused: dict[int, tuple[int, str]] = {}
    for job_id, attempt_id, path, data_dir in rows:
        verdict = refusal(path, data_dir=data_dir, job_id=job_id)
        (refused if verdict else accepted)[attempt_id] = (job_id, path)
    for attempt_id, (job_id, path) in refused.items():
        if attempt_id not in accepted:
            log.warning("job %d: not resuming from attempt %d's %r", job_id, attempt_id, path[:300])
    newest = {job_id: path for job_id, path in accepted.values()}  # a later attempt overwrites
    return newest


def newest_checkpoint(session: Session, job_id: int) -> str | None:
    """The newest checkpoint any attempt of the job left in its own dir, to resume from."""
    return newest_checkpoints(session, [job_id]).get(job_id)


def placement_text(session: Session, attempt_id: int) -> str:
    """Where an attempt runs, for the timeline: node and devices of each slice."""
    return "; ".join(
        f"{s.node_name} devices {list(s.devices)}" for s in slices_of(session, attempt_id)
    )
