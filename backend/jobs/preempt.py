"""Preemption on the job side: a victim takes the pause path, then goes back to the queue.

The scheduler decides (`backend.placement.preemption`); this moves the jobs. The victim
becomes `pausing` with stop request `preempt`: its ranks get SIGTERM, save a final
checkpoint within the node's `TRAINBOARD_PREEMPT_GRACE_SECONDS` and are killed after it.
When its attempt ends it is `queued` again (reason "preempted by job N") and resumes from
that checkpoint; it spends no restart. Both jobs' timelines say what happened and why.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.db import utcnow
from backend.jobs.models import Attempt, Job, JobEvent
from backend.jobs.states import JobState, transition
from workers.contract.protocol import StopRequest
from workers.contract.spec import Priority


def preempt(session: Session, *, victim_id: int, by_id: int, attempt_id: int) -> bool:
    """Ask a running victim to checkpoint and stop for `by_id`; False if it is not running."""
    with session.no_autoflush:
        victim, by = session.get_one(Job, victim_id), session.get_one(Job, by_id)
    if victim.state != JobState.running or victim.stop_request is not None:
        return False
    victim.stop_request = StopRequest.preempt
    victim.preempted_by, victim.preempted_at = by_id, utcnow()
    needs = f"{by.devices_requested} device{'s' if by.devices_requested > 1 else ''}"
    event = transition(
        victim,
        JobState.pausing,
        message=(
            f"preempted by job {by_id} ({Priority.of_rank(by.priority_rank)} priority, "
            f"needs {needs}): final checkpoint, then back to the queue"
        ),
        attempt_id=attempt_id,
    )
    event.kind = "preempted"  # the state is pausing; the timeline and webhooks say why
    session.add(event)
    session.add(
        JobEvent(
            job_id=by_id,
            kind="preempting",
            message=(
                f"preempting job {victim_id} ({Priority.of_rank(victim.priority_rank)} priority) "
                f"for its devices: it checkpoints and goes back to the queue"
            ),
        )
    )
    return True


def requeue_preempted(session: Session, job: Job, *, attempt_id: int, number: int) -> None:
    """The victim's attempt has ended: back to the queue at its submission place."""
    reason = f"preempted by job {job.preempted_by}"
    session.add(
        transition(
            job,
            JobState.queued,
            message=f"attempt {number} checkpointed and stopped: {reason}; queued again "
            "(resumes from its checkpoint, not counted as a restart)",
            reason=reason,
            attempt_id=attempt_id,
        )
    )
    job.wait_reason = reason


def apply_preemptions(
    session: Session, pairs: Sequence[tuple[int, int]]
) -> tuple[list[int], set[int]]:
    """Preempt each (victim, by) pair; the victims' attempts to signal and every job changed."""
    attempts: list[int] = []
    changed: set[int] = set()
    if not pairs:
        return attempts, changed
    # one query for every victim (job rows and current attempt ids), then no autoflush per pair
    current = {
        job_id: attempt_id
        for job_id, attempt_id in session.execute(
            select(Job.id, Attempt.id)
            .join(Attempt, (Job.id == Attempt.job_id) & (Job.attempt == Attempt.number))
            .where(Job.id.in_([victim for victim, _ in pairs]))
        )
    }
    # held here: the session's identity map keeps unmodified rows only weakly; the jobs
    # preempting too (`preempt` reads them), or it asks for each (a pass reads the queue as rows)
    wanted = [*current, *{by for _, by in pairs}]
    loaded = {j.id: j for j in session.scalars(select(Job).where(Job.id.in_(wanted)))}
    for victim_id, by_id in pairs:
        attempt_id = current.get(victim_id)
        if (
            attempt_id is not None
            and loaded[victim_id]
            and preempt(session, victim_id=victim_id, by_id=by_id, attempt_id=attempt_id)
        ):
            attempts.append(attempt_id)
            changed |= {victim_id, by_id}
    return attempts, changed
