"""REST route of the run table."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, status

from backend.auth.deps import ReaderDep, SessionDep
from backend.jobs.states import JobState
from backend.runtable import service
from backend.runtable.schemas import RunTable

router = APIRouter(prefix="/api/runs", tags=["runs"])
SORT_HELP = "[-]id, name, state, created_at, spec:<path>, final:<metric> or best:<metric>"

StateName = Annotated[
    list[JobState] | None, Query(max_length=12, description="keep these states (any of them)")
]


@router.get("", response_model=RunTable)
def run_table(
    principal: ReaderDep,
    session: SessionDep,
    column: Annotated[
        list[str] | None, Query(max_length=20, description="spec paths, e.g. hyperparameters.lr")
    ] = None,
    metric: Annotated[list[str] | None, Query(max_length=10, description="metrics")] = None,
    sort: Annotated[
        str,
        Query(
            max_length=256, description="[-]id|name|state|created_at|spec:<path>|final:<m>|best:<m>"
        ),
    ] = "-id",
    state: StateName = None,
    tag: Annotated[str | None, Query(max_length=64)] = None,
    q: Annotated[str | None, Query(max_length=128, description="in name or notes, or #id")] = None,
    group: Annotated[str | None, Query(max_length=256, description="a spec path")] = None,
    archived: Annotated[
        Literal["hide", "all", "only"], Query(description="archived jobs: hidden by default")
    ] = "hide",
    sweep: Annotated[int | None, Query(ge=1, le=2**31 - 1, description="a sweep's trials")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> dict[str, Any]:
    """A page of jobs as rows of settings and final/best metrics, sorted, filtered, grouped."""
    query = service.RunQuery(
        columns=column or [],
        metrics=metric or [],
        sort=sort,
        states=[s.value for s in state or []],
        tag=tag or None,
        text=q or None,
        group=group or None,
        archived=archived,
        sweep=sweep,
        limit=limit,
        offset=offset,
    )
    try:
        return service.table(session, principal=principal, query=query)
    except service.BadQuery as err:
        detail = [{"loc": ["query", err.field], "msg": str(err), "type": "value_error"}]
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail) from None
