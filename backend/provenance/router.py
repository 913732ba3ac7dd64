"""REST routes for provenance: the node posts it, users read it and diff it across jobs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, status
from pydantic import BaseModel, Field

from backend.auth.deps import NodeDep, ObjectId, ReaderDep, RowId, SessionDep
from backend.jobs.service import get_job
from backend.nodes.trust import acting_node
from backend.provenance import service
from workers.contract.provenance import ProvenanceIn

router = APIRouter(prefix="/api", tags=["provenance"])


class ProvenanceOut(BaseModel):
    job_id: int
    recorded: dict[str, Any] | None = Field(
        description="read by the node: script tree hash, git commit and diff, template"
    )
    reported: dict[str, Any] | None = Field(
        description="as reported by the job: its interpreter's python, torch and packages"
    )


class ProvenanceDiff(BaseModel):
    jobs: list[ProvenanceOut]
    differences: list[dict[str, Any]] = Field(description="fields whose values differ")


@router.post("/attempts/{attempt_id}/provenance", status_code=status.HTTP_204_NO_CONTENT)
def post_provenance(
    attempt_id: ObjectId, body: ProvenanceIn, principal: NodeDep, session: SessionDep
) -> None:
    """The node of rank 0 records what the attempt runs (only for its own attempts)."""
    service.record(session, attempt_id=attempt_id, node=acting_node(principal), body=body)


@router.get("/jobs/{job_id}/provenance", response_model=ProvenanceOut)
def get_provenance(job_id: ObjectId, principal: ReaderDep, session: SessionDep) -> ProvenanceOut:
    """What the job ran (None until its first attempt started)."""
    job = get_job(session, principal=principal, job_id=job_id)
    return ProvenanceOut.model_validate(service.view(job))


@router.get("/provenance/diff", response_model=ProvenanceDiff)
def diff_provenance(
    principal: ReaderDep,
    session: SessionDep,
    ids: Annotated[list[RowId], Query(min_length=2, max_length=50)],
) -> ProvenanceDiff:
    """The jobs' provenance side by side, and the fields that differ."""
    jobs = [get_job(session, principal=principal, job_id=i) for i in ids]
    return ProvenanceDiff(
        jobs=[ProvenanceOut.model_validate(service.view(j)) for j in jobs],
        differences=service.differences(jobs),
    )
