"""REST routes for series: downsampled curves, raw CSV export and job comparison."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi.responses import StreamingResponse
from sqlalchemy.orm import Session

from backend.auth.deps import ObjectId, ReaderDep, RowId, SessionDep
from backend.auth.service import Principal
from backend.db import Database
from backend.jobs import service as jobs
from backend.jobs.models import Attempt, Job
from backend.jobs.views import describe_jobs
from backend.runtable import compare
from backend.runtable.schemas import Comparison
from backend.telemetry.series import queries
from backend.telemetry.series.cache import SeriesCache
from backend.telemetry.series.costs import UpdateCosts, update_costs
from backend.telemetry.series.curves import XAxis, downsample
from backend.telemetry.series.devices import job_devices
from backend.telemetry.series.schemas import AttemptDevices, AttemptSeries, Curve

router = APIRouter(prefix="/api/series", tags=["series"])

Points = Annotated[int, Query(ge=0, le=100_000, description="LTTB point budget; 0 = raw")]
Rank = Annotated[int | None, Query(ge=0, le=1_000_000, description="one rank; default: mean")]
X = Annotated[XAxis, Query(description="x axis the downsampling follows")]


def get_cache(request: Request) -> SeriesCache:
    """The process's series cache (made with the app)."""
    cache: SeriesCache = request.app.state.series_cache
    return cache


CacheDep = Annotated[SeriesCache, Depends(get_cache)]


@router.get("/jobs/{job_id}/{name}", response_model=Curve)
def job_series(
    job_id: ObjectId,
    name: str,
    principal: ReaderDep,
    session: SessionDep,
    cache: CacheDep,
    points: Points = 2000,
    x: X = "step",
    rank: Rank = None,
) -> dict[str, Any]:
    """A job's metric over all its attempts, one value per step, downsampled to `points`."""
    job = _job(session, principal, job_id)
    curve, _ = queries.job_view(
        session, cache, job_id=job.id, name=name, points=points, x=x, rank=rank
    )
    return curve.as_columns()


@router.get("/devices/{job_id}", response_model=list[AttemptDevices])
def devices_of_job(
    job_id: ObjectId,
    principal: ReaderDep,
    session: SessionDep,
    points: Annotated[int, Query(ge=0, le=20_000, description="per device; 0 = all")] = 2000,
) -> list[dict[str, Any]]:
    """Each attempt of the job, oldest first: its span and its devices' samples within it."""
    job = _job(session, principal, job_id)
    return job_devices(session, job_id=job.id, points=points)


@router.get("/attempts/{name}", response_model=list[AttemptSeries])
def attempt_series(
    name: str,
    principal: ReaderDep,
    session: SessionDep,
    cache: CacheDep,
    attempt: Annotated[list[RowId], Query(min_length=1, max_length=50)],
    points: Points = 2000,
    x: X = "step",
    rank: Rank = None,
) -> list[dict[str, Any]]:
    """A metric of any attempts (of jobs the caller may read), each downsampled."""
    found = []
    for attempt_id in dict.fromkeys(attempt):
        row = session.get(Attempt, attempt_id)
        if row is None or not _readable(session, principal, row.job_id):
            # someone else's attempt is answered exactly like one that does not exist
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"attempt {attempt_id} not found")
        curve = queries.attempt_curve(session, cache, attempt_id=row.id, name=name, rank=rank)
        columns = downsample(curve, points, x).as_columns()
        found.append({"attempt_id": row.id, "job_id": row.job_id, "number": row.number, **columns})
    return found


CompareJobs = Annotated[list[RowId], Query(min_length=1, max_length=10)]


@router.get("/compare", response_model=Comparison)
def compare_jobs(
    principal: ReaderDep,
    session: SessionDep,
    cache: CacheDep,
    job: CompareJobs,
    metric: Annotated[list[str] | None, Query(max_length=20, description="default: all")] = None,
    points: Points = 1000,
    x: X = "step",
) -> dict[str, Any]:
    """The jobs, their spec differences, each metric's summaries and aligned curves."""
    chosen = [_job(session, principal, job_id) for job_id in dict.fromkeys(job)]
    names = metric or compare.metric_names(session, jobs=chosen)
    found = compare.compare(session, cache, jobs=chosen, metrics=names, points=points, x=x)
    return {"jobs": describe_jobs(session, chosen), **found}


@router.get("/costs", response_model=list[UpdateCosts])
def costs_of_jobs(
    principal: ReaderDep, session: SessionDep, cache: CacheDep, job: CompareJobs
) -> list[UpdateCosts]:
    """What each job's update mode costs: per rank step time and bytes, rank 0's server queue
    and staleness (#35)."""
    chosen = [_job(session, principal, job_id) for job_id in dict.fromkeys(job)]
    return [update_costs(session, cache, job_id=j.id) for j in chosen]


@router.get("/compare.csv", response_class=StreamingResponse)
def compare_csv(
    request: Request,
    principal: ReaderDep,
    session: SessionDep,
    job: CompareJobs,
    metric: str,
    x: X = "step",
) -> StreamingResponse:
    """One metric of the jobs at every step, aligned on x: one column per job."""
    chosen = [_job(session, principal, job_id) for job_id in dict.fromkeys(job)]
    db: Database = request.app.state.db
    cache = get_cache(request)
    named = [(j.id, j.name) for j in chosen]  # read now: the request's session closes first

    def lines() -> Iterator[str]:
        with db.session() as reading:
            yield from compare.csv_lines(reading, cache, jobs=named, name=metric, x=x)

    filename = compare.csv_filename(jobs=chosen, name=metric)
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    return StreamingResponse(lines(), media_type="text/csv", headers=headers)


@router.get("/jobs/{job_id}.csv", response_class=StreamingResponse)
def export_csv(
    job_id: ObjectId,
    request: Request,
    principal: ReaderDep,
    session: SessionDep,
    name: Annotated[list[str] | None, Query(max_length=50)] = None,
) -> StreamingResponse:
    """Every raw point of the job (optionally only some metrics) as CSV."""
    job = _job(session, principal, job_id)
    db: Database = request.app.state.db

    def lines() -> Iterator[str]:
        with db.session() as reading:
            yield from queries.csv_lines(reading, job_id=job.id, names=name or ())

    headers = {"Content-Disposition": f'attachment; filename="job-{job.id}-metrics.csv"'}
    return StreamingResponse(lines(), media_type="text/csv", headers=headers)


def _job(session: Session, principal: Principal, job_id: ObjectId) -> Job:
    return jobs.get_job(session, principal=principal, job_id=job_id)


def _readable(session: Session, principal: Principal, job_id: int) -> bool:
    try:
        jobs.get_job(session, principal=principal, job_id=job_id)
    except jobs.JobNotFound:
        return False
    return True
