"""Turning job rows into the JSON the API and the websocket send."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.auth.models import User
from backend.jobs.models import Attempt, Job
from backend.jobs.schemas import JobOut
from workers.spec import JobSpec

PRIORITY_NAMES = ("high", "normal", "low")


def describe_jobs(session: Session, jobs: Sequence[Job]) -> list[JobOut]:
    """API views of jobs, loading owners and current attempts in two queries."""
    if not jobs:
        return []
    owners = dict(
        session.execute(
            select(User.id, User.username).where(User.id.in_({j.owner_id for j in jobs}))
        ).all()
    )
    attempts = {
        (a.job_id, a.number): a
        for a in session.scalars(
            select(Attempt).where(Attempt.job_id.in_([j.id for j in jobs if j.attempt]))
        )
    }
    return [
        _view(job, owners.get(job.owner_id, "?"), attempts.get((job.id, job.attempt)))
        for job in jobs
    ]


def describe_job(session: Session, job: Job) -> JobOut:
    return describe_jobs(session, [job])[0]


def _view(job: Job, owner: str, attempt: Attempt | None) -> JobOut:
    spec = JobSpec.model_validate(job.spec)
    return JobOut(
        id=job.id,
        name=job.name,
        owner=owner,
        state=job.state,
        spec=job.spec,
        implications=spec.implications(),
        priority=PRIORITY_NAMES[job.priority_rank],
        tags=spec.tags,
        attempt=job.attempt,
        node=attempt.node_name if attempt else None,
        devices=list(attempt.devices) if attempt else [],
        restarts=job.restarts,
        reason=job.reason,
        step=job.step,
        total_steps=job.total_steps,
        parent_id=job.parent_id,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
    )
