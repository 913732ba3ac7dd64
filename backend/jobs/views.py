"""Turning job rows into the JSON the API and the websocket send."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.auth.models import User
from backend.db import fields_of
from backend.jobs.attempt_states import AttemptState
from backend.jobs.models import Attempt, AttemptSlice, Job, JobEvent
from backend.jobs.schemas import AttemptOut, EventOut, Implications, JobOut, SliceOut
from backend.jobs.states import PHASES, JobState, allowed_actions
from workers.contract.spec import Priority

#: JobOut fields copied from the job row as they are
JOB_FIELDS = (
    "id name attempt restarts reason step total_steps parent_id archived sweep_id "
    "sweep_trial early_stop created_at updated_at started_at finished_at"
)
#: AttemptOut fields copied from the attempt row as they are
ATTEMPT_FIELDS = (
    "id number resume_from last_checkpoint exit_reason facts created_at claimed_at finished_at"
    " slurm_job_id"
)


def describe_jobs(session: Session, jobs: Sequence[Job]) -> list[JobOut]:
    """API views of jobs, loading owners and current attempts in two queries."""
    if not jobs:
        return []
    jobs_by_id = {j.id: j for j in jobs}
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
    placements: dict[int, list[SliceOut]] = {}
    current = [a.id for a in attempts.values() if a.number == jobs_by_id[a.job_id].attempt]
    for part in session.scalars(
        select(AttemptSlice)
        .where(AttemptSlice.attempt_id.in_(current))
        .order_by(AttemptSlice.node_rank)
    ):
        placements.setdefault(part.attempt_id, []).append(
            SliceOut(node=part.node_name, devices=list(part.devices))
        )
    return [
        _view(
            job,
            owners.get(job.owner_id, "?"),
            attempt,
            placements.get(attempt.id, []) if attempt else [],
        )
        for job in jobs
        for attempt in [attempts.get((job.id, job.attempt))]
    ]


def describe_job(session: Session, job: Job) -> JobOut:
    return describe_jobs(session, [job])[0]


def _view(job: Job, owner: str, attempt: Attempt | None, placement: list[SliceOut]) -> JobOut:
    spec = job.spec_model
    return JobOut(
        owner=owner,
        state=JobState(job.state),
        phase=PHASES[JobState(job.state)],
        actions=allowed_actions(JobState(job.state)),
        spec=spec,
        implications=Implications.model_validate(spec.implications()),
        # ranks form a (dp, pp) grid, rank = dp_rank * stages + pp_rank (engine/distributed.py)
        loss_rank=spec.parallelism.stages - 1,
        placement=placement,
        facts=attempt.facts if attempt else None,
        wait_reason=job.wait_reason if job.state in ("queued", "scheduled") else None,
        queue_position=job.queue_position if job.state == "queued" else None,
        priority=Priority.of_rank(job.priority_rank).value,
        tags=spec.tags,
        node=attempt.node_name if attempt else None,
        devices=list(attempt.devices) if attempt else [],
        restart_at=job.restart_at if job.state == JobState.restarting else None,
        notes=job.notes or "",
        **fields_of(job, JOB_FIELDS),
    )


def attempt_views(session: Session, attempts: Sequence[Attempt]) -> list[AttemptOut]:
    """Attempts as the API returns them, each with every slice's node and devices."""
    placements: dict[int, list[SliceOut]] = {}
    for part in session.scalars(
        select(AttemptSlice)
        .where(AttemptSlice.attempt_id.in_([a.id for a in attempts]))
        .order_by(AttemptSlice.attempt_id, AttemptSlice.node_rank)
    ):
        placements.setdefault(part.attempt_id, []).append(
            SliceOut(node=part.node_name, devices=list(part.devices))
        )
    return [
        AttemptOut(
            node=attempt.node_name,
            devices=list(attempt.devices),
            placement=placements.get(attempt.id, []),
            state=AttemptState(attempt.state),
            **fields_of(attempt, ATTEMPT_FIELDS),
        )
        for attempt in attempts
    ]


def event_view(event: JobEvent) -> EventOut:
    """A timeline event as the API returns it."""
    return EventOut.model_validate(event)
