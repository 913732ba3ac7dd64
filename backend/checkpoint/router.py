"""REST routes for a job's checkpoints: list them, download one as a .pt state dict."""

from __future__ import annotations

import tempfile
from datetime import datetime
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter
from fastapi import Path as PathParam
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field
from starlette.background import BackgroundTask

from backend.auth.deps import ObjectId, ReaderDep, SessionDep
from backend.checkpoint import service
from backend.checkpoint.consolidate import consolidate
from backend.jobs.service import get_job

router = APIRouter(prefix="/api/jobs", tags=["checkpoints"])
Step = Annotated[int, PathParam(ge=0, le=10**15)]


class CheckpointOut(BaseModel):
    attempt: int
    step: int
    size_bytes: int
    saved_at: datetime


class CheckpointListOut(BaseModel):
    checkpoints: list[CheckpointOut] = Field(
        description=f"the newest {service.MAX_LISTED} complete checkpoints, oldest step first"
    )
    total: int = Field(description="complete checkpoints on disk, listed or not")
    more: int = Field(description="older checkpoints on disk that are not listed")


@router.get("/{job_id}/checkpoints", response_model=CheckpointListOut)
def list_checkpoints(
    job_id: ObjectId, principal: ReaderDep, session: SessionDep
) -> CheckpointListOut:
    """The job's newest complete checkpoints on disk, oldest step first, with their sizes,
    and how many older ones are not listed."""
    job = get_job(session, principal=principal, job_id=job_id)
    listing = service.checkpoints_of(session, job=job)
    return CheckpointListOut(
        checkpoints=[
            CheckpointOut(
                attempt=c.attempt, step=c.step, size_bytes=c.size_bytes, saved_at=c.saved_at
            )
            for c in listing.checkpoints
        ],
        total=listing.total,
        more=listing.total - len(listing.checkpoints),
    )


@router.get(
    "/{job_id}/checkpoints/{step}/download",
    response_class=FileResponse,
    responses={200: {"content": {"application/octet-stream": {}}}},
)
def download_checkpoint(
    job_id: ObjectId, step: Step, principal: ReaderDep, session: SessionDep
) -> FileResponse:
    """The checkpoint's model weights as one file that torch loads with weights_only=True
    (the job's owner only: to anyone else the job does not exist)."""
    job = service.owned_job(session, principal=principal, job_id=job_id)
    scratch = tempfile.mkdtemp(prefix="tb-download-")
    out = Path(scratch) / f"job-{job.id}-step-{step}.pt"
    try:
        with service.open_step(session, job=job, step=step) as (_, step_fd):
            consolidate(step_fd, out)
    except BaseException:
        _remove(scratch)
        raise
    return FileResponse(
        out,
        media_type="application/octet-stream",
        filename=out.name,
        background=BackgroundTask(_remove, scratch),
    )


def _remove(directory: str) -> None:
    import shutil

    shutil.rmtree(directory, ignore_errors=True)
