"""Device-seconds per attempt: allocated (devices x time from allocation to end) and busy.

An attempt's devices are allocated from its claim, or, where a cluster manager allocated
them before (Slurm: the job's allocation starts before its batch shell, srun and the
supervisor that claims), from that allocation's start (`AllocationStart`), as the manager
bills it. Busy is utilization-weighted from the device samples, which exist from the claim
on: each device's seconds from claim to end times the mean utilization (0-100 %, capped)
of its samples during the attempt (a start-up before the claim is allocated, not busy).
An attempt records both when it has ended (`settle`); a running one is counted up to now.
Reused by per-job efficiency views: `attempt_usage` is the one place that computes them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from backend.db import as_utc, utcnow
from backend.jobs.models import Attempt, AttemptSlice, Job
from backend.telemetry.models import DeviceSample
from backend.usage.models import AllocationStart

#: an ended attempt is settled this long after its end, when its last samples are in
SETTLE_AFTER = timedelta(seconds=10)
WEEK = timedelta(days=7)


@dataclass(frozen=True)
class AttemptUsage:
    attempt_id: int
    job_id: int
    owner_id: int
    nodes: tuple[tuple[str, int], ...]  # (node, devices there) per slice
    devices: int
    start: datetime | None  # allocated (claimed, or the manager's start); None: never ran
    end: datetime | None  # None: still running
    allocated: float  # device-seconds
    busy: float | None  # device-seconds; None: no utilization samples


def device_count(slices: Iterable[AttemptSlice]) -> int:
    return sum(len(s.devices) for s in slices)


def allocated_seconds(
    *, devices: int, start: datetime | None, end: datetime | None, now: datetime
) -> float:
    """Devices x seconds from start (the allocation's) to end (or now)."""
    if start is None:
        return 0.0
    stop = as_utc(end) if end is not None else now
    return devices * max(0.0, (stop - as_utc(start)).total_seconds())


def allocation_start(claimed: datetime | None, allocated: datetime | None) -> datetime | None:
    """When an attempt's devices became its own: the cluster manager's allocation start
    where one is recorded, else the claim (the earlier of the two: a manager's clock a
    little ahead of the control plane's never makes an attempt shorter than its claim)."""
    if claimed is None or allocated is None:
        return allocated if claimed is None else claimed
    return min(as_utc(claimed), as_utc(allocated))


def busy_fraction(session: Session, attempt_ids: Sequence[int]) -> dict[int, float]:
    """Per attempt: the mean over its devices of their mean sampled utilization, 0..1."""
    if not attempt_ids:
        return {}
    rows = session.execute(
        select(
            DeviceSample.attempt_id,
            DeviceSample.node,
            DeviceSample.device,
            func.avg(case((DeviceSample.util > 100.0, 100.0), else_=DeviceSample.util)),
        )
        .where(DeviceSample.attempt_id.in_(attempt_ids), DeviceSample.util.is_not(None))
        .group_by(DeviceSample.attempt_id, DeviceSample.node, DeviceSample.device)
    ).all()
    per: dict[int, list[float]] = {}
    for attempt_id, _node, _device, mean in rows:
        per.setdefault(int(attempt_id), []).append(float(mean) / 100.0)
    return {a: sum(means) / len(means) for a, means in per.items()}


def attempt_usage(
    session: Session,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    job_ids: Sequence[int] | None = None,
    attempt_ids: Sequence[int] | None = None,
    now: datetime | None = None,
) -> list[AttemptUsage]:
    """Every attempt that ran in [since, until) (or of these jobs), with its device-seconds."""
    now = now or utcnow()
    query = (
        select(Attempt, Job.owner_id, Job.devices_requested, AllocationStart.started_at)
        .join(Job, Job.id == Attempt.job_id)
        .outerjoin(AllocationStart, AllocationStart.attempt_id == Attempt.id)
        .where(Attempt.claimed_at.is_not(None) | AllocationStart.started_at.is_not(None))
    )
    if until is not None:  # its start, the earlier of the two, is before until
        query = query.where((Attempt.claimed_at < until) | (AllocationStart.started_at < until))
    if since is not None:
        query = query.where((Attempt.finished_at.is_(None)) | (Attempt.finished_at >= since))
    if job_ids is not None:
        query = query.where(Attempt.job_id.in_(job_ids))
    if attempt_ids is not None:
        query = query.where(Attempt.id.in_(attempt_ids))
    rows = session.execute(query.order_by(Attempt.id)).all()
    ids = [row[0].id for row in rows]
    nodes: dict[int, list[tuple[str, int]]] = {}
    for attempt_id, node, devices in session.execute(
        select(AttemptSlice.attempt_id, AttemptSlice.node_name, AttemptSlice.devices)
        .where(AttemptSlice.attempt_id.in_(ids))
        .order_by(AttemptSlice.node_rank)
    ):
        nodes.setdefault(attempt_id, []).append((node, len(devices)))
    unsettled = [row[0].id for row in rows if row[0].busy_device_seconds is None]
    fractions = busy_fraction(session, unsettled)
    result = []
    for attempt, owner, requested, allocated_at in rows:
        devices = attempt.device_count or requested
        start = allocation_start(attempt.claimed_at, allocated_at)
        allocated = attempt.allocated_device_seconds
        if allocated is None:
            allocated = allocated_seconds(
                devices=devices, start=start, end=attempt.finished_at, now=now
            )
        busy = attempt.busy_device_seconds
        if busy is None and attempt.id in fractions:  # sampled from the claim on
            sampled = allocated_seconds(
                devices=devices, start=attempt.claimed_at, end=attempt.finished_at, now=now
            )
            busy = min(sampled, allocated) * fractions[attempt.id]
        result.append(
            AttemptUsage(
                attempt_id=attempt.id,
                job_id=attempt.job_id,
                owner_id=attempt.owner_id or owner,
                nodes=tuple(nodes.get(attempt.id, [(attempt.node_name, devices)])),
                devices=devices,
                start=start,
                end=attempt.finished_at,
                allocated=allocated,
                busy=busy,
            )
        )
    return result


def settle(session: Session, *, limit: int = 500) -> int:
    """Record allocated and busy device-seconds on attempts that ended a while ago."""
    ended = session.scalars(
        select(Attempt)
        .where(
            Attempt.finished_at.is_not(None),
            Attempt.finished_at < utcnow() - SETTLE_AFTER,
            Attempt.allocated_device_seconds.is_(None),
        )
        .limit(limit)
    ).all()
    if not ended:
        return 0
    ids = [a.id for a in ended]
    usage = {u.attempt_id: u for u in attempt_usage(session, attempt_ids=ids)}
    for attempt in ended:
        found = usage.get(attempt.id)  # None: it never ran (withdrawn before a claim)
        attempt.allocated_device_seconds = found.allocated if found else 0.0
        attempt.busy_device_seconds = found.busy if found else 0.0  # None: no samples
    return len(ended)


def next_settle(session: Session) -> datetime | None:
    """When the first ended attempt not yet settled is due (`settle`); None if none waits."""
    first = session.scalar(
        select(func.min(Attempt.finished_at)).where(
            Attempt.finished_at.is_not(None), Attempt.allocated_device_seconds.is_(None)
        )
    )
    return None if first is None else as_utc(first) + SETTLE_AFTER


def decayed_usage(
    session: Session, *, half_life: timedelta, now: datetime | None = None
) -> dict[int, float]:
    """Device-seconds per owner, each second weighted 2^(-age/half_life) (Slurm's decay)."""
    now = now or utcnow()
    h = half_life.total_seconds()
    horizon = now - half_life * 20  # older usage weighs less than a millionth
    usage: dict[int, float] = {}
    for owner, devices, start, end in _claimed_spans(session, ended_after=horizon):
        older = (now - as_utc(start)).total_seconds()
        newer = max(0.0, (now - as_utc(end)).total_seconds()) if end else 0.0
        weight = h / math.log(2) * (2 ** (-newer / h) - 2 ** (-max(older, newer) / h))
        usage[owner] = usage.get(owner, 0.0) + devices * weight
    return usage


def device_hours_since(
    session: Session, owners: Sequence[int], *, since: datetime, now: datetime | None = None
) -> dict[int, float]:
    """Device-hours each owner's attempts were allocated in [since, now]."""
    now = now or utcnow()
    if not owners:
        return {}
    hours: dict[int, float] = {}
    for owner, devices, start, end in _claimed_spans(session, ended_after=since, owners=owners):
        seconds = allocated_seconds(
            devices=devices, start=max(as_utc(start), since), end=end, now=now
        )
        hours[owner] = hours.get(owner, 0.0) + seconds / 3600
    return hours


def _claimed_spans(
    session: Session, *, ended_after: datetime, owners: Sequence[int] | None = None
) -> list[tuple[int, int, datetime, datetime | None]]:
    """(owner, devices, allocated at, finished at or None) of every attempt allocated
    devices (claimed, or started by the cluster manager) that was still running at
    `ended_after` or later, of `owners` (None: everyone's)."""
    query = (
        select(
            Job.owner_id,
            Attempt.device_count,
            Job.devices_requested,
            Attempt.claimed_at,
            AllocationStart.started_at,
            Attempt.finished_at,
        )
        .join(Job, Job.id == Attempt.job_id)
        .outerjoin(AllocationStart, AllocationStart.attempt_id == Attempt.id)
        .where(
            Attempt.claimed_at.is_not(None) | AllocationStart.started_at.is_not(None),
            (Attempt.finished_at.is_(None)) | (Attempt.finished_at >= ended_after),
        )
    )
    if owners is not None:
        query = query.where(Job.owner_id.in_(owners))
    spans = []
    for owner, counted, requested, claimed, allocated, end in session.execute(query).all():
        start = allocation_start(claimed, allocated)
        if start is not None:  # the query asks for allocated attempts
            spans.append((owner, counted or requested, start, end))
    return spans
