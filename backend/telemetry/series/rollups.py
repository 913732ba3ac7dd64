"""Curve rollups: a job's per-step curves kept as min/max buckets, sealed while the job runs.

A chart of a million-step run shows at most a few thousand points. Reading a million
rows to pick them costs a second or more per run; reading the min and the max of every
bucket of W steps costs 2/W of that and, followed by LTTB, picks nearly the same points
(this is tsdownsample's MinMaxLTTB, with the min/max pass done once, ahead of time).

Steps are cut into aligned blocks of BLOCK_STEPS. The builder (rollup_builder.py) seals
each curve (rank mean, attempts merged) up to a step every rank of its running attempts
has passed, or to its end once the job settled, storing per block and width
W = 16·2^k the first and last point and every bucket's min and max point. A curve's
seal row (CurveSeal) says how far it is sealed and up to which *marked* point id: every
transaction that adds points to a series adds a marked row at or below their lowest step
(see MetricPoint, cache.py). So a query checks the marks after the watermark (an index
range of the few rows since the builder's last pass): blocks that end at or below the
lowest changed step are current, and everything from there on (the unsealed tail, a
late point's block, a new attempt's steps) is read raw and bucketed the same way.

Every bucket keeps the exact minimum and maximum of its steps and every block its last
point, so the whole curve's min, max, best and final are exact from the candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.jobs.models import Attempt
from backend.telemetry.models import CurveBlock, CurveSeal
from backend.telemetry.series import cache
from backend.telemetry.series.curves import Curve, merge_attempts, per_step

#: the finest bucket width, in steps; each next level doubles it
FIRST_WIDTH = 16
#: steps of an aligned block, and the coarsest width (so each width's buckets align with it)
BLOCK_STEPS = 65_536
#: a query uses the coarsest level with at least this many buckets per point asked for
BUCKETS_PER_POINT = 2
#: below every step; the first seal reads from here
LOWEST = -(2**31)
COLUMNS = 6  # min step, min time, min value, max step, max time, max value
# `step + 0`: with min(step), PostgreSQL may walk the key's index up from the lowest step
# until a row passes `id > ?` instead of the marks' index range (docs/benchmarks.md)
LOWEST_MARK_AFTER = (
    "SELECT min(step + 0) FROM metric_points WHERE attempt_id = ? AND name = ? AND mark AND id > ?"
)


def widths() -> list[int]:
    """Bucket widths every block stores, finest first."""
    return [FIRST_WIDTH << k for k in range((BLOCK_STEPS // FIRST_WIDTH).bit_length())]


def bucket_extremes(curve: Curve, width: int) -> np.ndarray:
    """Per bucket of `width` steps: the min point and the max point, as COLUMNS rows."""
    bucket = curve.step // width
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    counts = np.diff(np.r_[starts, len(bucket)])
    owner = np.repeat(np.arange(len(starts)), counts)
    out = np.empty((COLUMNS, len(starts)))
    for offset, reduce in ((0, np.minimum), (3, np.maximum)):
        extreme = reduce.reduceat(curve.value, starts)
        hits = np.flatnonzero(curve.value == extreme[owner])
        first_hit = hits[np.searchsorted(owner[hits], np.arange(len(starts)))]
        out[offset] = curve.step[first_hit]
        out[offset + 1] = curve.time[first_hit]
        out[offset + 2] = curve.value[first_hit]
    return out


def join_extremes(before: np.ndarray, after: np.ndarray, width: int) -> np.ndarray:
    """Extremes of two adjacent step ranges as one; a bucket split between them is merged."""
    if not before.shape[1] or not after.shape[1]:
        return np.concatenate([before, after], axis=1)
    if before[0, -1] // width != after[0, 0] // width:
        return np.concatenate([before, after], axis=1)
    joint = before[:, -1].copy()
    if after[2, 0] < joint[2]:  # ties keep the earlier step, as bucket_extremes does
        joint[0:3] = after[0:3, 0]
    if after[5, 0] > joint[5]:
        joint[3:6] = after[3:6, 0]
    return np.concatenate([before[:, :-1], joint[:, None], after[:, 1:]], axis=1)


def block_rows(
    curve: Curve, *, job_id: int, name: str, start: int, end: int
) -> list[dict[str, Any]]:
    """The rows that store `curve` (its points in [start, end), at least one) at every width."""
    base: dict[str, Any] = {"job_id": job_id, "name": name, "start_step": start, "end_step": end}
    base |= {"first_step": int(curve.step[0]), "first_time": float(curve.time[0])}
    base |= {"first_value": float(curve.value[0]), "last_step": int(curve.step[-1])}
    base |= {"last_time": float(curve.time[-1]), "last_value": float(curve.value[-1])}
    if not np.isfinite(curve.value).all():
        return [{**base, "width": w, "buckets": 0, "data": b""} for w in widths()]
    rows = []
    for width in widths():
        extremes = bucket_extremes(curve, width)
        data = extremes.astype("<f8").tobytes()
        rows.append({**base, "width": width, "buckets": extremes.shape[1], "data": data})
    return rows


def extremes_of(row: CurveBlock) -> np.ndarray:
    """A block row's bucket columns."""
    return np.frombuffer(row.data, dtype="<f8").reshape(COLUMNS, row.buckets)


def candidates(blocks: Sequence[CurveBlock], tail: Curve, width: int) -> Curve:
    """The blocks' min, max, first and last points, then the tail's, in step order."""
    parts = [extremes_of(b) for b in blocks]
    ends = [(b.first_step, b.first_time, b.first_value) for b in blocks]
    ends += [(b.last_step, b.last_time, b.last_value) for b in blocks]
    if len(tail.step):
        parts.append(bucket_extremes(tail, width))
        ends += [(tail.step[i], tail.time[i], tail.value[i]) for i in (0, -1)]
    columns = np.concatenate(parts, axis=1) if parts else np.empty((COLUMNS, 0))
    points = np.array(ends, dtype=np.float64).reshape(-1, 3).T
    step = np.r_[columns[0], columns[3], points[0]]
    time_ = np.r_[columns[1], columns[4], points[1]]
    value = np.r_[columns[2], columns[5], points[2]]
    order = np.argsort(step, kind="stable")
    step, time_, value = step[order], time_[order], value[order]
    keep = np.r_[True, step[1:] != step[:-1]]
    return Curve(step[keep].astype(np.int64), time_[keep], value[keep])


def load(session: Session, *, job_id: int, name: str, points: int) -> Curve | None:
    """Candidate points for a `points`-point view of the job's curve; None: read it raw.

    Sealed blocks that no point committed since their seal touches, then the rest raw.
    """
    if points <= 0:
        return None
    seal = session.scalar(
        select(CurveSeal).where(CurveSeal.job_id == job_id, CurveSeal.name == name)
    )
    if seal is None:
        return None
    attempts = attempt_ids(session, job_id)
    changed = lowest_change(session, attempts=attempts, name=name, after=seal.watermark)
    usable = seal.sealed_through if changed is None else min(seal.sealed_through, changed)
    layout = session.execute(
        select(
            CurveBlock.width, CurveBlock.start_step, CurveBlock.end_step, CurveBlock.buckets
        ).where(CurveBlock.job_id == job_id, CurveBlock.name == name, CurveBlock.end_step <= usable)
    ).all()
    broken = [start for _, start, _, buckets in layout if buckets == 0]
    if broken:  # a non-finite value: its block and what follows are read raw
        layout = [row for row in layout if row.end_step <= min(broken)]
    totals: dict[int, int] = {}
    for width, _, _, buckets in layout:
        totals[width] = totals.get(width, 0) + buckets
    fits = [w for w, total in totals.items() if total >= points * BUCKETS_PER_POINT]
    if not fits:
        return None
    through = max(row.end_step for row in layout)
    blocks = session.scalars(
        select(CurveBlock)
        .where(
            CurveBlock.job_id == job_id,
            CurveBlock.name == name,
            CurveBlock.width == max(fits),
            CurveBlock.end_step <= through,
        )
        .order_by(CurveBlock.start_step)
    ).all()
    if not blocks:
        return None
    # a prefix of the blocks even if the builder committed since `layout`: only the last
    # block grows, and a rebuild replaces blocks with ones of the same range at once
    through = max(b.end_step for b in blocks)
    tail = merge_attempts([per_step(rows_from(session, a, name, through)) for a in attempts])
    return candidates(blocks, tail, max(fits))


def attempt_ids(session: Session, job_id: int) -> list[int]:
    """The job's attempts, oldest first (a later one's points win at a step)."""
    query = select(Attempt.id).where(Attempt.job_id == job_id).order_by(Attempt.number)
    return list(session.scalars(query))


def lowest_change(
    session: Session, *, attempts: Sequence[int], name: str, after: int
) -> int | None:
    """The lowest step any transaction committed after marked id `after` may have touched."""
    lows = [
        cache._query(session, LOWEST_MARK_AFTER, (attempt, name, after))[0][0]
        for attempt in attempts
    ]
    found = [int(low) for low in lows if low is not None]
    return min(found) if found else None


def rows_from(session: Session, attempt_id: int, name: str, step: int) -> cache.Raw:
    """One attempt's points of a metric at `step` and above (an index range), every rank."""
    rows = np.array(cache._query(session, cache.ROWS_FROM, (attempt_id, name, step)), np.float64)
    rank, steps, time, value = rows.reshape(-1, 4).T
    return cache.Raw(rank.astype(np.int64), steps.astype(np.int64), time, value, watermark=0)
