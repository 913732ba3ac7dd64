"""Run-health routes: the pre-launch memory estimate, a job's efficiency, its stacks at hangs."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.exceptions import RequestValidationError

from backend.auth.deps import ObjectId, ReaderDep, SessionDep
from backend.health.efficiency import job_efficiency
from backend.health.hang_stacks import hang_stacks_of
from backend.health.schemas import EfficiencyOut, HangStackOut
from backend.jobs import service as jobs
from backend.jobs.memory import memory_fit
from backend.jobs.schemas import MemoryEstimateOut
from workers.contract.spec import JobSpec

router = APIRouter(prefix="/api", tags=["health"])


@router.post("/estimate/memory", response_model=MemoryEstimateOut)
def estimate_memory(spec: JobSpec, principal: ReaderDep, session: SessionDep) -> dict[str, Any]:
    """Memory per device of a template spec and which devices hold it; 422 for a script job."""
    del principal  # any signed-in reader may ask
    if spec.template is None:
        raise RequestValidationError(
            [
                {
                    "type": "value_error",
                    "loc": ("body", "template"),
                    "msg": "a memory estimate needs a template job (a script's model is unknown)",
                    "input": None,
                }
            ]
        )
    return memory_fit(session, spec=spec)


@router.get("/jobs/{job_id}/efficiency", response_model=EfficiencyOut)
def efficiency(job_id: ObjectId, principal: ReaderDep, session: SessionDep) -> dict[str, Any]:
    """Device-hours, throughput per device and MFU (templates) of a job the caller may read."""
    job = jobs.get_job(session, principal=principal, job_id=job_id)
    return job_efficiency(session, job).as_dict()


@router.get("/jobs/{job_id}/hang-stacks", response_model=list[HangStackOut])
def hang_stacks(job_id: ObjectId, principal: ReaderDep, session: SessionDep) -> list[HangStackOut]:
    """Each rank's Python stacks at the job's hangs; owner (or admin) only, like its logs."""
    job = jobs.get_job(session, principal=principal, job_id=job_id)
    return hang_stacks_of(session, job=job)
