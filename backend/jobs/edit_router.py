"""REST routes that change a job after submit: rename, notes, tags, archive; bulk actions."""

from __future__ import annotations

from fastapi import APIRouter, Request

from backend.auth.deps import ObjectId, SessionDep, SubmitterDep
from backend.jobs import housekeeping, service
from backend.jobs.housekeeping import BulkIn, BulkResult, JobEdit
from backend.jobs.schemas import JobOut
from backend.jobs.views import describe_job

router = APIRouter(prefix="/api/jobs", tags=["jobs"])


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
