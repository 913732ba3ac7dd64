"""REST routes for usage accounting and for users' shares and quotas (admins set them)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from pydantic import BeforeValidator

from backend.auth.deps import AdminDep, ReaderDep, SessionDep, SettingsDep
from backend.db import as_utc, utcnow
from backend.signals import wake_scheduler
from backend.usage import service
from backend.usage.schemas import DailyUsageOut, LimitsIn, LimitsOut, UsageBy, UsageOut

router = APIRouter(prefix="/api", tags=["usage"])
MAX_RANGE = timedelta(days=400)
_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*")


def _iso_only(value: object) -> object:
    """Refuse a bare number (pydantic would read it as unix seconds): the schema says
    date-time, so the API takes ISO 8601 only."""
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        raise ValueError("an ISO 8601 date-time (e.g. 2026-11-25T00:00:00Z), not a number")
    return value


From = Annotated[
    datetime | None,
    Query(alias="from", description="default: 7 days before to"),
    BeforeValidator(_iso_only),
]
To = Annotated[
    datetime | None, Query(alias="to", description="default: now"), BeforeValidator(_iso_only)
]


def _window(start: From = None, end: To = None) -> tuple[datetime, datetime]:
    """[from, to) of a usage query, both in UTC: to defaults to now, from to 7 days before."""
    end = as_utc(end) if end is not None else utcnow()
    start = as_utc(start) if start is not None else end - timedelta(days=7)
    if start >= end:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            [{"loc": ["query", "from"], "msg": "from must be before to", "type": "value_error"}],
        )
    if end - start > MAX_RANGE:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            [{"loc": ["query", "from"], "msg": "at most 400 days at once", "type": "value_error"}],
        )
    return start, end


Window = Annotated[tuple[datetime, datetime], Depends(_window)]


@router.get("/usage", response_model=UsageOut)
def get_usage(
    principal: ReaderDep,
    session: SessionDep,
    settings: SettingsDep,
    window: Window,
    by: UsageBy = "user",
) -> UsageOut:
    """Device-seconds allocated and busy in [from, to), per user, job or node (yours only
    unless you are an admin); under the Slurm executor, Slurm's accounting beside them."""
    start, end = window
    slurm = settings.executor == "slurm"
    return service.usage_report(
        session, principal=principal, start=start, end=end, by=by, slurm=slurm
    )


@router.get("/usage/daily", response_model=DailyUsageOut)
def get_daily_usage(
    principal: ReaderDep,
    session: SessionDep,
    settings: SettingsDep,
    window: Window,
) -> DailyUsageOut:
    """Per user and UTC day: allocated against busy device-seconds (the usage view), and
    under the Slurm executor what Slurm's accounting says was allocated."""
    start, end = window
    slurm = settings.executor == "slurm"
    return service.daily_usage(session, principal=principal, start=start, end=end, slurm=slurm)


@router.get("/users/limits", response_model=list[LimitsOut])
def list_limits(_: AdminDep, session: SessionDep) -> list[LimitsOut]:
    """Admin: every user's fair-share weight and quotas, with current use."""
    return list(service.describe_limits(session).values())


@router.patch("/users/{username}/limits", response_model=LimitsOut)
def set_limits(
    username: str, body: LimitsIn, request: Request, _: AdminDep, session: SessionDep
) -> LimitsOut:
    """Admin: set a user's share (default 1) and quotas (null: none)."""
    limits = service.set_limits(session, username=username, changes=body)
    wake_scheduler(request.app.state.redis)
    return limits
