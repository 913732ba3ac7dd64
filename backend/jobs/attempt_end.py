"""Ending an attempt, the one place that does it: every slice ends with it, then the job moves.

Whatever ends an attempt (its nodes' reports, a lost node, a node's new incarnation, a
claim timeout, a stop before it started) calls `end_attempt`, which ends every live slice
of it in the same transaction, so its devices are free at once and a node that later
receives or still runs its task is told to stop (`backend.jobs.fencing`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import redis
from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.db import utcnow
from backend.jobs.attempt_states import (
    LIVE_SLICE,
    AttemptState,
    SliceState,
    set_attempt_state,
    set_slice_state,
)
from backend.jobs.models import Attempt, AttemptSlice, Job
from backend.jobs.oom import remediate
from backend.jobs.preempt import requeue_preempted
from backend.jobs.states import JobState, cancelled_state, transition
from backend.signals import request_stop
from workers.contract.protocol import AttemptOutcome, StopRequest
from workers.contract.rank_env import EXIT_FINAL

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
    if job.attempt == attempt.number:
        advance_job(
            session,
            job,
            attempt,
            AttemptEnd(state=state, reason=reason, platform_fault=platform_fault),
        )


@dataclass(frozen=True)
class AttemptEnd:
    """How an attempt ended, whoever saw it end: its nodes' report or the control plane."""

    state: AttemptState  # succeeded, failed, stopped, lost or withdrawn
    reason: str | None = None
    platform_fault: bool = False  # not the job's doing: no restart of the user's is spent
    pause: bool = False  # its own policy paused it (a full disk), it did not fail
    final: bool = False  # a rank exited EXIT_FINAL: the job's input fails every restart

    @classmethod
    def reported(cls, outcome: AttemptOutcome) -> AttemptEnd:
        """The end a node's finish report describes."""
        return cls(
            state=AttemptState(outcome.outcome),
            reason=outcome.reason,
            platform_fault=outcome.platform_fault,
            pause=outcome.pause,
            final=outcome.outcome == "failed" and EXIT_FINAL in outcome.exit_codes,
        )


def _said(attempt: Attempt, what: str, end: AttemptEnd) -> str:
    return f"attempt {attempt.number} {what}" + (f" ({end.reason})" if end.reason else "")


def _succeeded(session: Session, job: Job, attempt: Attempt, end: AttemptEnd) -> None:
    message = f"attempt {attempt.number} finished all steps"
    if job.early_stop:  # its stop came too late: it succeeded, and reads so (the verdict
        job.early_stop = None  # stays in the timeline)
        message += " before its early stop took effect"
    session.add(transition(job, JobState.succeeded, message=message, attempt_id=attempt.id))


def _preempted(session: Session, job: Job, attempt: Attempt, end: AttemptEnd) -> None:
    requeue_preempted(session, job, attempt_id=attempt.id, number=attempt.number)


def _cancelled(session: Session, job: Job, attempt: Attempt, end: AttemptEnd) -> None:
    early = job.early_stop is not None
    message = _said(attempt, "stopped early" if early else "stopped", end)
    reason = job.early_stop or "cancelled by user"
    session.add(
        transition(job, cancelled_state(job), message=message, reason=reason, attempt_id=attempt.id)
    )


def _paused(session: Session, job: Job, attempt: Attempt, end: AttemptEnd) -> None:
    message, reason = _said(attempt, "paused", end), "paused by user"
    session.add(
        transition(job, JobState.paused, message=message, reason=reason, attempt_id=attempt.id)
    )


def _paused_by_policy(session: Session, job: Job, attempt: Attempt, end: AttemptEnd) -> None:
    message = f"attempt {attempt.number} paused"
    session.add(
        transition(job, JobState.paused, message=message, reason=end.reason, attempt_id=attempt.id)
    )


def _unclaimed(session: Session, job: Job, attempt: Attempt, end: AttemptEnd) -> None:
    unclaimed(session, job, reason=end.reason or "no node claimed it", attempt_id=attempt.id)


def _failed_for_good(session: Session, job: Job, attempt: Attempt, end: AttemptEnd) -> None:
    message = f"attempt {attempt.number} failed; no restart can fix it"
    session.add(
        transition(job, JobState.failed, message=message, reason=end.reason, attempt_id=attempt.id)
    )


def _restart_or_fail(session: Session, job: Job, attempt: Attempt, end: AttemptEnd) -> None:
    restart_or_fail(
        session,
        job,
        reason=end.reason or "ranks stopped",
        attempt_id=attempt.id,
        platform_fault=end.platform_fault,
    )


Applies = Callable[[Job, AttemptEnd], bool]
Moves = Callable[[Session, Job, Attempt, AttemptEnd], None]
#: What a job does after its current attempt ended: the first rule that applies decides.
#: Every end goes through here: a node's report (backend.jobs.attempts.finish), a lost
#: node, a node's new incarnation, a withdrawn claim, cancel, pause, preemption, early stop.
RULES: tuple[tuple[str, Applies, Moves], ...] = (
    ("every step done: succeeded", lambda j, e: e.state is AttemptState.succeeded, _succeeded),
    ("preempted: queued again", lambda j, e: j.stop_request is StopRequest.preempt, _preempted),
    (
        "cancel asked (early stop included): cancelled or stopped",
        lambda j, e: j.stop_request is StopRequest.cancel or j.state == JobState.cancelling,
        _cancelled,
    ),
    (
        "pause asked: paused",
        lambda j, e: j.stop_request is StopRequest.pause or j.state == JobState.pausing,
        _paused,
    ),
    (
        "its policy stopped it (a full disk): paused",
        lambda j, e: e.state is AttemptState.stopped and e.pause,
        _paused_by_policy,
    ),
    (
        "no node claimed it: placed again",
        lambda j, e: e.state is AttemptState.withdrawn,
        _unclaimed,
    ),
    ("a failure no restart can fix: failed", lambda j, e: e.final, _failed_for_good),
    ("anything else: restart or fail", lambda j, e: True, _restart_or_fail),
)


def advance_job(session: Session, job: Job, attempt: Attempt, end: AttemptEnd) -> str:
    """Move the job on after its current attempt ended; the name of the rule that decided."""
    for name, applies, moves in RULES:
        if applies(job, end):
            moves(session, job, attempt, end)
            return name
    raise AssertionError("the last rule applies to every end")


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
    the micro-batch instead (backend.jobs.oom), while its reductions last.
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
    # plain words on the job page (#33): whose fault it was and what it cost the job
    counted = (
        f"not counted: a platform fault, not the job's; {job.restarts} of {max_restarts} "
        "automatic restarts used"
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
