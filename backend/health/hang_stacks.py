"""The ranks' Python stacks at a hang, as the supervisor sent them (`hang_stack` job events).

The supervisor keeps each as `hang-stacks/rank-<r>.txt` in the attempt's log dir on its node
(workers/supervisor/hang_stacks.py) and publishes the first 4 KiB as an event whose first
line is `rank <r>`; the job page reads them here, not in the timeline.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.db import as_utc
from backend.health.schemas import HangStackOut
from backend.jobs.models import Attempt, Job, JobEvent

KIND = "hang_stack"


def hang_stacks_of(session: Session, *, job: Job) -> list[HangStackOut]:
    """Every rank's stack at every hang of the job, oldest hang first, by rank."""
    events = session.execute(
        select(JobEvent, Attempt.number)
        .outerjoin(Attempt, Attempt.id == JobEvent.attempt_id)
        .where(JobEvent.job_id == job.id, JobEvent.kind == KIND)
        .order_by(JobEvent.id)
    ).all()
    found = []
    for event, number in events:
        first, _, stack = event.message.partition("\n")
        label, _, rank = first.partition(" ")
        if label != "rank" or not rank.isdigit():
            continue  # not the supervisor's shape: nothing to show
        found.append(
            HangStackOut(
                attempt_id=event.attempt_id,
                attempt=number,
                rank=int(rank),
                step=event.step,
                time=as_utc(event.time),
                stack=stack,
            )
        )
    # one hang's ranks are sent a moment apart; a later hang of an attempt is at a later step
    return sorted(found, key=lambda s: (s.attempt_id or 0, s.step or 0, s.rank, s.time))
