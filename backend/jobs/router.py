"""REST routes for jobs: submit, list, read, cancel, pause, resume, clone, events, metrics,
logs; and after submit: rename, notes, tags, archive, bulk actions."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse
from pydantic import ValidationError
from sqlalchemy.orm import Session

from backend.auth.deps import (
    ObjectId,
    ReaderDep,
    SessionDep,
    SettingsDep,
    SubmissionDep,
    SubmitterDep,
)
from backend.auth.service import Principal
from backend.checkpoint import service as checkpoints
from backend.db import Database
from backend.jobs import housekeeping, service
from backend.jobs.housekeeping import BulkIn, BulkResult, JobEdit
from backend.jobs.models import Job
from backend.jobs.schemas import (
    AttemptOut,
    EventOut,
    JobList,
    JobOut,
    LogList,
    MetricNames,
    ResumeIn,
    ValidationOut,
)
from backend.jobs.views import attempt_views, describe_job, describe_jobs, event_view
from backend.telemetry import series
from backend.telemetry.series import logs
from backend.telemetry.series.schemas import Curve
from workers.contract.spec import JobSpec

router = APIRouter(prefix="/api/jobs", tags=["jobs"])
JobState = Annotated[
    str | None,
    Query(
        pattern="^(queued|scheduled|running|succeeded|failed|cancelled|paused|cancelling|pausing|restarting|stopped)$"
    ),
]


@router.post("", status_code=status.HTTP_201_CREATED, response_model=JobOut)
def submit_job(
    spec: JobSpec,
    request: Request,
    principal: SubmissionDep,
    session: SessionDep,
    settings: SettingsDep,
) -> JobOut:
    """Queue a job; 422 names the field of any invalid or unsupported part of the spec."""
    job = service.submit(
        session,
        request.app.state.redis,
        principal=principal,
        spec=spec,
        script_roots=settings.script_root_paths,
    )
    return describe_job(session, job)


@router.post("/validate", response_model=ValidationOut)
def validate_job(
    body: Annotated[
        dict[str, Any],
        Body(description="a JobSpec as POST /api/jobs takes; any JSON object is answered"),
    ],
    principal: SubmitterDep,
    session: SessionDep,
    settings: SettingsDep,
) -> ValidationOut:
    """What a spec implies, its memory estimate and every refusal a submission of it would
    get, in 422-detail shape (problems); nothing is stored or counted as a submission."""
    # the submit scope, not read: the entrypoint check tells whether a script exists under
    # the script roots, which only a caller who may submit learns (from a submission's 422)
    del principal
    return service.validate(session, body=body, script_roots=settings.script_root_paths)


@router.get("", response_model=JobList)
def list_jobs(
    principal: ReaderDep,
    session: SessionDep,
    state: JobState = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    archived: Annotated[
        Literal["hide", "only", "all"], Query(description="archived jobs: hidden by default")
    ] = "hide",
) -> JobList:
    """Jobs the caller may see, newest first."""
    jobs = service.visible_jobs(
        session, principal=principal, state=state, limit=limit, archived=archived
    )
    return JobList(jobs=describe_jobs(session, jobs))


@router.get("/{job_id}", response_model=JobOut)
def get_job(job_id: ObjectId, principal: ReaderDep, session: SessionDep) -> JobOut:
    return describe_job(session, _job(session, principal, job_id))


def _stop_route(action: Literal["cancel", "pause"], doc: str) -> None:
    """POST /{job_id}/<action>: cancel and pause are one route that differs in its action."""

    def stop_job(
        job_id: ObjectId, request: Request, principal: SubmitterDep, session: SessionDep
    ) -> JobOut:
        job = _job(session, principal, job_id)
        service.stop(session, request.app.state.redis, principal=principal, job=job, action=action)
        return describe_job(session, job)

    stop_job.__doc__ = doc  # the operation's description in the OpenAPI schema
    router.post(f"/{{job_id}}/{action}", response_model=JobOut, name=f"{action}_job")(stop_job)


_stop_route(
    "cancel", "Cancel: at once when queued, else its ranks checkpoint and stop (state cancelling)."
)
_stop_route(
    "pause", "Pause: its ranks save a checkpoint and stop (state pausing → paused); resume later."
)


@router.post("/{job_id}/resume", response_model=JobOut)
def resume_job(
    job_id: ObjectId,
    request: Request,
    principal: SubmitterDep,
    session: SessionDep,
    body: ResumeIn | None = None,
) -> JobOut:
    """Queue a paused, cancelled or failed job again, from its newest checkpoint."""
    job = _job(session, principal, job_id)
    devices = body.devices if body else None
    with _spec_errors():
        service.resume(
            session, request.app.state.redis, principal=principal, job=job, devices=devices
        )
    return describe_job(session, job)


@router.post("/{job_id}/clone", status_code=status.HTTP_201_CREATED, response_model=JobOut)
def clone_job(
    job_id: ObjectId,
    request: Request,
    principal: SubmissionDep,
    session: SessionDep,
    settings: SettingsDep,
    changes: Annotated[
        dict[str, Any], Body(description="a partial JobSpec merged over the parent's")
    ]
    | None = None,
    from_step: Annotated[
        int | None,
        Query(ge=0, le=10**15, description="start from the parent's checkpoint of this step"),
    ] = None,
) -> JobOut:
    """A new job from this one's spec with changes (hyperparameters, devices, ...); with
    from_step, it starts from that checkpoint of the parent (its owner's only)."""
    parent = _job(session, principal, job_id)
    seed = None
    if from_step is not None:
        owned = checkpoints.owned_job(session, principal=principal, job_id=job_id)
        seed = checkpoints.at_step(session, job=owned, step=from_step)
    with _spec_errors():
        job = service.clone(
            session,
            request.app.state.redis,
            principal=principal,
            parent=parent,
            changes=changes or {},
            script_roots=settings.script_root_paths,
            start=(seed.step, seed.path) if seed else None,
        )
    return describe_job(session, job)


@router.get("/{job_id}/attempts", response_model=list[AttemptOut])
def list_attempts(job_id: ObjectId, principal: ReaderDep, session: SessionDep) -> list[AttemptOut]:
    job = _job(session, principal, job_id)
    return attempt_views(session, service.attempts_of(session, job=job))


@router.get("/{job_id}/events", response_model=list[EventOut])
def list_events(job_id: ObjectId, principal: ReaderDep, session: SessionDep) -> list[EventOut]:
    """The job's timeline, oldest first."""
    job = _job(session, principal, job_id)
    return [event_view(e) for e in service.events_of(session, job=job)]


@router.get("/{job_id}/metrics", response_model=MetricNames)
def list_metrics(job_id: ObjectId, principal: ReaderDep, session: SessionDep) -> MetricNames:
    job = _job(session, principal, job_id)
    return MetricNames(names=series.metric_names(session, job_id=job.id))


@router.get("/{job_id}/metrics/{name}", response_model=Curve)
def get_metric(
    job_id: ObjectId,
    name: str,
    principal: ReaderDep,
    session: SessionDep,
    rank: Annotated[int | None, Query(ge=0, le=1_000_000)] = None,
) -> Curve:
    """A metric as columns by step; without rank, the mean over ranks."""
    job = _job(session, principal, job_id)
    return Curve(**series.series(session, job_id=job.id, name=name, rank=rank))


@router.get("/{job_id}/logs", response_model=LogList)
def get_logs(
    job_id: ObjectId,
    principal: ReaderDep,
    session: SessionDep,
    settings: SettingsDep,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 300,
    q: Annotated[
        str | None,
        Query(
            max_length=200,
            description="only lines holding this text (any case), searched "
            "over the job's whole stored log",
        ),
    ] = None,
    rank: Annotated[int | None, Query(ge=0, le=1_000_000)] = None,
) -> LogList:
    """The job's newest lines, oldest first; with q or rank, the newest that match; and how
    many of its oldest lines the per-attempt cap deleted."""
    job = _job(session, principal, job_id)
    found = series.recent_logs(session, job_id=job.id, limit=limit, contains=q, rank=rank)
    dropped = logs.dropped_lines(session, job_id=job.id)
    cap = settings.log_lines_per_attempt
    return LogList.model_validate({"lines": found, "dropped": dropped, "cap": cap})


@router.get("/{job_id}/logs.txt", response_class=StreamingResponse)
def download_logs(
    job_id: ObjectId,
    request: Request,
    principal: ReaderDep,
    session: SessionDep,
    attempt: Annotated[int | None, Query(ge=1, le=1_000_000, description="one attempt")] = None,
) -> StreamingResponse:
    """Every stored line of the job (or one attempt) as text, streamed; readable like its logs."""
    job = _job(session, principal, job_id)
    db: Database = request.app.state.db

    def chunks() -> Iterator[str]:
        with db.session() as reading:  # the request's session closes before the body streams
            yield from logs.log_text(reading, job_id=job.id, attempt=attempt)

    filename = logs.log_filename(job_id=job.id, attempt=attempt)
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    return StreamingResponse(chunks(), media_type="text/plain; charset=utf-8", headers=headers)


@contextmanager
def _spec_errors() -> Iterator[None]:
    """Turn a refused merged spec into a 422 naming the field, like a submission's."""
    try:
        yield
    except ValidationError as err:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in err.errors(include_url=False)]
        raise RequestValidationError(errors) from None


def _job(session: Session, principal: Principal, job_id: int) -> Job:
    return service.get_job(session, principal=principal, job_id=job_id)


@router.patch("/{job_id}", response_model=JobOut)
def edit_job(
    job_id: ObjectId,
    change: JobEdit,
    request: Request,
    principal: SubmitterDep,
    session: SessionDep,
) -> JobOut:
    """Rename, set notes (markdown) or tags, archive or restore; fields left out stay."""
    job = service.get_job(session, principal=principal, job_id=job_id)
    housekeeping.edit(session, request.app.state.redis, principal=principal, job=job, change=change)
    return describe_job(session, job)


@router.post("/bulk", response_model=list[BulkResult])
def bulk_action(
    body: BulkIn, request: Request, principal: SubmitterDep, session: SessionDep
) -> list[BulkResult]:
    """Cancel, archive or restore several jobs; each id answers for itself."""
    return housekeeping.bulk(
        session, request.app.state.redis, principal=principal, ids=body.ids, action=body.action
    )
