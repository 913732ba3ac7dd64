"""Curve rollups: a settled job's per-step curves kept as min/max buckets at several widths.

A chart of a million-step run shows at most a few thousand points. Reading a million
rows to pick them costs about a second per run; reading the min and the max of every
bucket of W steps costs 2/W of that and, followed by LTTB, picks nearly the same points
(this is tsdownsample's MinMaxLTTB, with the min/max pass done once, ahead of time).

A job is *settled* when every attempt has finished at least `grace` seconds ago: then its
curves no longer change until a new attempt starts, which makes its rollups stale (they
record the newest attempt they cover). Curves shorter than MIN_STEPS get one marker row
(width 0) so the builder does not look at them again; they are read raw.

Every bucket keeps the exact minimum and maximum of its steps, so the whole curve's
min, max and best are those of the buckets, and its final point is stored apart: a
comparison's summaries come out of the rollups exactly.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from backend.db import utcnow
from backend.jobs.models import Attempt
from backend.telemetry.curves import Curve
from backend.telemetry.models import CurveRollup

#: curves with fewer steps are read raw
MIN_STEPS = 20_000
#: the finest bucket width, in steps; each next level doubles it
FIRST_WIDTH = 16
#: a level needs at least this many buckets to be worth keeping
MIN_BUCKETS = 1_000
#: a query uses the coarsest level with at least this many buckets per point asked for
BUCKETS_PER_POINT = 2
COLUMNS = 6  # min step, min time, min value, max step, max time, max value


def widths(steps: int) -> list[int]:
    """Bucket widths worth storing for a curve of `steps` points."""
    out = []
    width = FIRST_WIDTH
    while steps >= MIN_STEPS and steps // width >= MIN_BUCKETS:
        out.append(width)
        width *= 2
    return out


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


def rollup_rows(curve: Curve, *, job_id: int, name: str, through: int) -> list[dict[str, Any]]:
    """The rows that store `curve` (one marker row when it is too short or empty)."""
    base: dict[str, Any] = {"job_id": job_id, "name": name, "through_attempt_id": through}
    base["steps"] = len(curve.step)
    if len(curve.step):
        base |= {"first_step": int(curve.step[0]), "first_time": float(curve.time[0])}
        base |= {"first_value": float(curve.value[0]), "last_step": int(curve.step[-1])}
        base |= {"last_time": float(curve.time[-1]), "last_value": float(curve.value[-1])}
    else:
        base |= dict.fromkeys(("first_step", "last_step"), 0)
        base |= dict.fromkeys(("first_time", "first_value", "last_time", "last_value"), 0.0)
    levels = widths(len(curve.step)) if np.isfinite(curve.value).all() else []
    if not levels:
        return [{**base, "width": 0, "buckets": 0, "data": b""}]
    rows = []
    for width in levels:
        extremes = bucket_extremes(curve, width)
        data = extremes.astype("<f8").tobytes()
        rows.append({**base, "width": width, "buckets": extremes.shape[1], "data": data})
    return rows


def candidates(row: CurveRollup) -> Curve:
    """A level's min and max points, plus the first and last point, in step order."""
    columns = np.frombuffer(row.data, dtype="<f8").reshape(COLUMNS, row.buckets)
    step = np.r_[row.first_step, columns[0], columns[3], row.last_step]
    time_ = np.r_[row.first_time, columns[1], columns[4], row.last_time]
    value = np.r_[row.first_value, columns[2], columns[5], row.last_value]
    order = np.argsort(step, kind="stable")
    step, time_, value = step[order], time_[order], value[order]
    keep = np.r_[True, step[1:] != step[:-1]]
    return Curve(step[keep].astype(np.int64), time_[keep], value[keep])


def load(session: Session, *, job_id: int, name: str, points: int) -> Curve | None:
    """Candidate points for a `points`-point view of the job's curve; None: read it raw."""
    through = _newest_attempt(session, job_id)
    if through is None or points <= 0:
        return None
    fits = (
        select(CurveRollup)
        .where(
            CurveRollup.job_id == job_id,
            CurveRollup.name == name,
            CurveRollup.through_attempt_id == through,
            CurveRollup.width > 0,
            CurveRollup.buckets >= points * BUCKETS_PER_POINT,
        )
        .order_by(CurveRollup.width.desc())
        .limit(1)
    )
    row = session.scalars(fits).first()
    return candidates(row) if row is not None else None


def settled_jobs(session: Session, *, grace: float, limit: int) -> list[tuple[int, int]]:
    """(job, newest attempt) of settled jobs whose rollups are missing or stale."""
    newest = (
        select(
            Attempt.job_id,
            func.max(Attempt.id).label("through"),
            func.count().label("attempts"),
            func.count(Attempt.finished_at).label("finished"),
            func.max(Attempt.finished_at).label("last_finish"),
        )
        .group_by(Attempt.job_id)
        .subquery()
    )
    current = select(CurveRollup.id).where(
        CurveRollup.job_id == newest.c.job_id,
        CurveRollup.through_attempt_id == newest.c.through,
    )
    query = (
        select(newest.c.job_id, newest.c.through)
        .where(
            newest.c.attempts == newest.c.finished,
            newest.c.last_finish <= utcnow() - timedelta(seconds=grace),
            ~current.exists(),
        )
        .order_by(newest.c.job_id)
        .limit(limit)
    )
    return [(job, through) for job, through in session.execute(query)]


def replace(session: Session, *, job_id: int, rows: list[dict[str, Any]]) -> None:
    """The job's rollups become `rows` (from rollup_rows of each of its curves)."""
    session.execute(delete(CurveRollup).where(CurveRollup.job_id == job_id))
    if rows:
        session.execute(insert(CurveRollup), rows)


def _newest_attempt(session: Session, job_id: int) -> int | None:
    newest: int | None = session.scalar(
        select(func.max(Attempt.id)).where(Attempt.job_id == job_id)
    )
    return newest
