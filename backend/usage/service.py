"""Usage reports and users' limits: what `/api/usage` and `/api/users/.../limits` serve."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.auth.models import User
from backend.auth.service import Principal
from backend.auth.users import UserNotFound
from backend.db import as_utc, utcnow
from backend.jobs.attempt_states import LIVE_SLICE_VALUES
from backend.jobs.models import Attempt, AttemptSlice
from backend.usage.accounting import WEEK, AttemptUsage, attempt_usage, device_hours_since
from backend.usage.models import SlurmUsage, UserLimits
from backend.usage.schemas import (
    DailyUsageOut,
    DailyUsageRow,
    LimitsIn,
    LimitsOut,
    UsageBy,
    UsageOut,
    UsageRow,
)


def _clipped(usage: AttemptUsage, start: datetime, end: datetime, now: datetime) -> float:
    """The share (0..1) of the attempt's allocated time that lies in [start, end)."""
    if usage.start is None:
        return 0.0
    began, ended = as_utc(usage.start), as_utc(usage.end) if usage.end else now
    whole = (ended - began).total_seconds()
    inside = (min(ended, end) - max(began, start)).total_seconds()
    if whole <= 0:
        return 0.0
    return max(0.0, inside) / whole


def _visible(
    session: Session, principal: Principal, start: datetime, end: datetime
) -> list[AttemptUsage]:
    rows = attempt_usage(session, since=start, until=end)
    if principal.is_admin:
        return rows
    return [u for u in rows if u.owner_id == principal.user_id]


def _slurm_allocated(session: Session, usages: list[AttemptUsage]) -> dict[int, float]:
    """Slurm's accounting of these attempts (those it has recorded): device-seconds each."""
    ids = [u.attempt_id for u in usages]
    found: dict[int, float] = {}
    for chunk in range(0, len(ids), 500):
        rows = session.execute(
            select(SlurmUsage.attempt_id, SlurmUsage.allocated_device_seconds).where(
                SlurmUsage.attempt_id.in_(ids[chunk : chunk + 500])
            )
        )
        found.update({attempt_id: seconds for attempt_id, seconds in rows})
    return found


def usage_report(
    session: Session,
    *,
    principal: Principal,
    start: datetime,
    end: datetime,
    by: UsageBy,
    slurm: bool = False,
) -> UsageOut:
    """Device-seconds allocated and busy in [start, end), per user, job or node; with
    `slurm` (the Slurm executor), Slurm's accounting of the same attempts beside them."""
    now = utcnow()
    names = _usernames(session)
    visible = _visible(session, principal, start, end)
    accounted = _slurm_allocated(session, visible) if slurm else {}
    totals: dict[str, list[float]] = {}
    for usage in visible:
        share = _clipped(usage, start, end, now)
        if share <= 0:
            continue
        parts: list[tuple[str, float]]
        if by == "user":
            parts = [(names.get(usage.owner_id, "?"), 1.0)]
        elif by == "job":
            parts = [(str(usage.job_id), 1.0)]
        else:
            parts = [(node, count / usage.devices) for node, count in usage.nodes]
        sacct = accounted.get(usage.attempt_id)
        for key, weight in parts:
            row = totals.setdefault(key, [0.0, 0.0, 0, 0.0, 0])
            row[0] += usage.allocated * share * weight
            row[1] += (usage.busy or 0.0) * share * weight
            row[2] += 1
            if sacct is not None:  # spread over the window like Trainboard's own figure
                row[3] += sacct * share * weight
                row[4] += 1
    rows = [
        UsageRow(
            key=k,
            allocated_device_seconds=a,
            busy_device_seconds=b,
            attempts=int(n),
            slurm_allocated_device_seconds=s if slurm else None,
            slurm_accounted_attempts=int(m) if slurm else None,
        )
        for k, (a, b, n, s, m) in sorted(totals.items(), key=lambda kv: -kv[1][0])
    ]
    total = UsageRow(
        key="total",
        allocated_device_seconds=sum(r.allocated_device_seconds for r in rows),
        busy_device_seconds=sum(r.busy_device_seconds for r in rows),
        attempts=len({u.attempt_id for u in visible}),
        slurm_allocated_device_seconds=(
            sum(r.slurm_allocated_device_seconds or 0.0 for r in rows) if slurm else None
        ),
        slurm_accounted_attempts=len(set(accounted)) if slurm else None,
    )
    return UsageOut(start=start, end=end, by=by, rows=rows, total=total)


def _days(start: datetime, end: datetime) -> Iterator[tuple[date, datetime, datetime]]:
    day = start.astimezone(UTC).date()
    while True:
        begin = datetime.combine(day, time(), tzinfo=UTC)
        if begin >= end:
            return
        yield day, max(begin, start), min(begin + timedelta(days=1), end)
        day += timedelta(days=1)


def daily_usage(
    session: Session, *, principal: Principal, start: datetime, end: datetime, slurm: bool = False
) -> DailyUsageOut:
    """Per user and UTC day: allocated and busy device-seconds (busy spread like allocated),
    and with `slurm` Slurm's accounting of the same attempts, spread the same way."""
    now, names = utcnow(), _usernames(session)
    visible = _visible(session, principal, start, end)
    accounted = _slurm_allocated(session, visible) if slurm else {}
    cells: dict[tuple[date, str], list[float]] = {}
    for usage in visible:
        for day, begin, finish in _days(start, end):
            share = _clipped(usage, begin, finish, now)
            if share > 0:
                cell = cells.setdefault((day, names.get(usage.owner_id, "?")), [0.0, 0.0, 0.0])
                cell[0] += usage.allocated * share
                cell[1] += (usage.busy or 0.0) * share
                cell[2] += accounted.get(usage.attempt_id, 0.0) * share
    rows = [
        DailyUsageRow(
            day=d,
            user=u,
            allocated_device_seconds=a,
            busy_device_seconds=b,
            slurm_allocated_device_seconds=s if slurm else None,
        )
        for (d, u), (a, b, s) in sorted(cells.items())
    ]
    return DailyUsageOut(start=start, end=end, rows=rows)


def _usernames(session: Session) -> dict[int, str]:
    return {i: n for i, n in session.execute(select(User.id, User.username))}


def _user(session: Session, username: str) -> User:
    user = session.scalars(select(User).where(User.username == username)).first()
    if user is None:
        raise UserNotFound(f"no user named {username!r}")
    return user


def set_limits(session: Session, *, username: str, changes: LimitsIn) -> LimitsOut:
    """Admin: change a user's share and quotas (fields left out keep their value)."""
    user = _user(session, username)
    limits = session.get(UserLimits, user.id) or UserLimits(user_id=user.id, share=1.0)
    session.add(limits)
    given = changes.model_fields_set
    if "share" in given:
        limits.share = changes.share if changes.share is not None else 1.0
    if "max_devices" in given:
        limits.max_devices = changes.max_devices
    if "max_device_hours" in given:
        limits.max_device_hours = changes.max_device_hours
    session.commit()
    return describe_limits(session)[user.username]


def describe_limits(session: Session) -> dict[str, LimitsOut]:
    """Every user's share and quotas, with what they hold and used (admin view)."""
    users = session.scalars(select(User).order_by(User.username)).all()
    limits = {lim.user_id: lim for lim in session.scalars(select(UserLimits))}
    now = utcnow()
    hours = device_hours_since(session, [u.id for u in users], since=now - WEEK, now=now)
    in_use: dict[int, int] = {}
    for owner, devices in session.execute(
        select(Attempt.owner_id, AttemptSlice.devices)
        .join(Attempt, Attempt.id == AttemptSlice.attempt_id)
        .where(AttemptSlice.state.in_(LIVE_SLICE_VALUES))
    ):
        if owner is not None:
            in_use[owner] = in_use.get(owner, 0) + len(devices)
    result = {}
    for user in users:
        lim = limits.get(user.id)
        result[user.username] = LimitsOut(
            user=user.username,
            share=lim.share if lim else 1.0,
            max_devices=lim.max_devices if lim else None,
            max_device_hours=lim.max_device_hours if lim else None,
            device_hours_7d=hours.get(user.id, 0.0),
            devices_in_use=in_use.get(user.id, 0),
        )
    return result
