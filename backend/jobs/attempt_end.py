"""Ending an attempt, the one place that does it: every slice ends with it, then the job moves.

Whatever ends an attempt (its nodes' reports, a lost node, a node's new incarnation, a
claim timeout, a stop before it started) calls `end_attempt`, which ends every live slice
of it in the same transaction, so its devices are free at once and a node that later
receives or still runs its task is told to stop (`backend.nodes.fencing`).
"""

from __future__ import annotations

from datetime import timedelta

import redis
from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.db import utcnow
from backend.health.oom import remediate
from backend.jobs.models import Attempt, AttemptSlice, Job
from backend.jobs.preempt import requeue_preempted
from backend.jobs.run_states import (
    LIVE_SLICE,
    AttemptState,
    SliceState,
    set_attempt_state,
    set_slice_state,
)
from backend.jobs.states import JobState, cancelled_state, transition
from backend.signals import request_stop
from workers.contract.protocol import StopRequest

#: automatic restarts wait 5 s, 10 s, 20 s ... (capped), so a crash loop does not burn them
BACKOFF_FIRST_SECONDS = 5.0
BACKOFF_MAX_SECONDS = 300.0
#: attempts no node claims in time (a platform fault) before the job fails with the reason
MAX_UNCLAIMED = 3


def backoff_seconds(restarts: int) -> float:
    """The wait before automatic restart number `restarts` (1, 2, ...)."""
    return min(BACKOFF_MAX_SECONDS, BACKOFF_FIRST_SECONDS * 2 ** max(0, restarts - 1))


def end_slices(session: Session, attempt: Attempt, *, running_to: SliceState) -> bool:
    """End every live slice: unclaimed ones are withdrawn, claimed ones become `running_to`.

    True when some slice was running (its node must be told to stop its ranks).
    """
    now, ran = utcnow(), False
    for part in session.scalars(
        select(AttemptSlice).where(
            AttemptSlice.attempt_id == attempt.id,
            AttemptSlice.state.in_([s.value for s in LIVE_SLICE]),
        )
    ):
        ran |= part.state == SliceState.running
        set_slice_state(
            part, SliceState.withdrawn if part.state == SliceState.scheduled else running_to
        )
        part.finished_at = now
    return ran


def end_attempt(
    session: Session,
    client: redis.Redis,
    attempt: Attempt,
    *,
    state: AttemptState,
    reason: str,
    platform_fault: bool = False,
) -> None:
    """End a live attempt from the control plane and move its job on (the caller commits).

    A platform fault (a lost node, a node's restart, an unclaimed slice) does not spend
    the user's `max_restarts`.
    """
    set_attempt_state(attempt, state)
    attempt.finished_at = utcnow()
    attempt.exit_reason = reason
    lost = state is AttemptState.lost
    if end_slices(session, attempt, running_to=SliceState.lost if lost else SliceState.withdrawn):
        request_stop(client, attempt_id=attempt.id, action=StopRequest.cancel)
    job = session.get_one(Job, attempt.job_id)
    if job.attempt != attempt.number:
        return
    if job.stop_request == StopRequest.preempt and job.state == JobState.pausing:
        requeue_preempted(session, job, attempt_id=attempt.id, number=attempt.number)
    elif job.stop_request == StopRequest.cancel or (job.state == JobState.cancelling):
        session.add(transition(job, cancelled_state(job), message=reason, attempt_id=attempt.id))
    elif job.stop_request == StopRequest.pause or (job.state == JobState.pausing):
        session.add(transition(job, JobState.paused, message=reason, attempt_id=attempt.id))
    elif state is AttemptState.withdrawn:
        unclaimed(session, job, reason=reason, attempt_id=attempt.id)
    else:
        restart_or_fail(
            session, job, reason=reason, attempt_id=attempt.id, platform_fault=platform_fault
        )


def unclaimed(session: Session, job: Job, *, reason: str, attempt_id: int) -> None:
    """An attempt no node claimed: queue the job again, or fail it after MAX_UNCLAIMED."""
    job.unclaimed += 1
    if job.unclaimed >= MAX_UNCLAIMED:
        why = f"{reason}, {job.unclaimed} times: is that node's worker listening for work?"
        session.add(
            transition(job, JobState.failed, message=why, reason=why, attempt_id=attempt_id)
        )
        return
    message = f"{reason} ({job.unclaimed} of {MAX_UNCLAIMED} tries); placing it again"
    if job.state == JobState.scheduled:
        session.add(transition(job, JobState.queued, message=message, attempt_id=attempt_id))
    else:  # part of the gang ran: it restarts at once, not counted against max_restarts
        job.restart_at = utcnow()
        session.add(transition(job, JobState.restarting, message=message, attempt_id=attempt_id))
    job.wait_reason = message


def restart_or_fail(
    session: Session,
    job: Job,
    *,
    reason: str,
    attempt_id: int | None,
    platform_fault: bool = False,
) -> None:
    """Restart from the newest checkpoint after a back-off while allowed, else fail.

    An out-of-memory failure under `health.on_oom: reduce_microbatch` restarts with half
    the micro-batch instead (backend.health.oom), while its reductions last.
    """
    if remediate(session, job, reason=reason, attempt_id=attempt_id):
        return
    max_restarts = job.spec_model.max_restarts
    if not platform_fault and job.restarts >= max_restarts:
        session.add(
            transition(job, JobState.failed, message=reason, reason=reason, attempt_id=attempt_id)
        )
        return
    if not platform_fault:
        job.restarts += 1
    wait = backoff_seconds(job.restarts if not platform_fault else 1)
    job.restart_at = utcnow() + timedelta(seconds=wait)
    counted = (
        "not counted: a platform fault"
        if platform_fault
        else (f"restart {job.restarts} of {max_restarts}")
    )
    session.add(
        transition(
            job,
            JobState.restarting,
            message=f"restarting in {wait:.0f} s ({counted}) after: {reason}",
            reason=reason,
            attempt_id=attempt_id,
        )
    )


def release_restarts(session: Session) -> set[int]:
    """Queue every restarting job whose back-off is over; their ids."""
    now = utcnow()
    due = session.scalars(
        select(Job).where(Job.state == JobState.restarting, Job.restart_at <= now)
    ).all()
    for job in due:
        job.restart_at = None
        session.add(transition(job, JobState.queued, message="back-off over: placing it again"))
    return {job.id for job in due}
