"""REST routes for sweeps: submit a search, list, read (trials and best), cancel."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, status

from backend.auth.deps import ObjectId, ReaderDep, SessionDep, SettingsDep, SubmitterDep
from backend.security.ratelimit import spend_submissions
from backend.sweeps import service
from backend.sweeps.schemas import SweepIn, SweepList, SweepOut
from backend.sweeps.views import describe_sweep

router = APIRouter(prefix="/api/sweeps", tags=["sweeps"])


@router.post("", status_code=status.HTTP_201_CREATED, response_model=SweepOut)
def create_sweep(
    body: SweepIn,
    request: Request,
    principal: SubmitterDep,
    session: SessionDep,
    settings: SettingsDep,
) -> SweepOut:
    """Start a sweep; 422 names the field when the search or any trial's spec is refused,
    429 when its trials would pass the caller's submit limit (each trial is a submission)."""
    sweep = service.create(
        session,
        request.app.state.redis,
        principal=principal,
        sweep_in=body,
        script_roots=settings.script_root_paths,
        admit=lambda trials: spend_submissions(request, settings, principal.user_id, trials),
    )
    return describe_sweep(session, sweep)


@router.get("", response_model=SweepList)
def list_sweeps(
    principal: ReaderDep,
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> SweepList:
    """Sweeps the caller may see, newest first."""
    sweeps = service.visible_sweeps(session, principal=principal, limit=limit)
    return SweepList(sweeps=[describe_sweep(session, s) for s in sweeps])


@router.get("/{sweep_id}", response_model=SweepOut)
def get_sweep(sweep_id: ObjectId, principal: ReaderDep, session: SessionDep) -> SweepOut:
    """The sweep's trials table and its best trial so far."""
    sweep = service.get_sweep(session, principal=principal, sweep_id=sweep_id)
    return describe_sweep(session, sweep)


@router.post("/{sweep_id}/cancel", response_model=SweepOut)
def cancel_sweep(
    sweep_id: ObjectId, request: Request, principal: SubmitterDep, session: SessionDep
) -> SweepOut:
    """Cancel: no more trials start and every live trial is cancelled."""
    sweep = service.get_sweep(session, principal=principal, sweep_id=sweep_id)
    service.cancel(session, request.app.state.redis, principal=principal, sweep=sweep)
    return describe_sweep(session, sweep)
