"""Series, snapshots and CSV export of jobs' metrics (the caller checks who may read them)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.jobs.models import Attempt
from backend.telemetry.models import MetricPoint
from backend.telemetry.series import reads, rollups
from backend.telemetry.series.cache import SeriesCache
from backend.telemetry.series.curves import (
    Curve,
    XAxis,
    downsample,
    merge_attempts,
    per_step,
    summary,
)

#: steps per metric a job topic's snapshot holds (all ranks at each), downsampled
SNAPSHOT_STEPS = 2000
CSV_COLUMNS = ["job_id", "attempt", "rank", "step", "name", "value", "time"]


def attempts_of(session: Session, job_id: int) -> list[Attempt]:
    query = select(Attempt).where(Attempt.job_id == job_id).order_by(Attempt.number)
    return list(session.scalars(query))


def job_curve(
    session: Session, cache: SeriesCache, *, job_id: int, name: str, rank: int | None = None
) -> Curve:
    """A job's metric, one value per step, over all its attempts (later ones win)."""
    curves = [
        per_step(cache.raw(session, attempt_id=a.id, name=name), rank)
        for a in attempts_of(session, job_id)
    ]
    return merge_attempts(curves)


def job_view(
    session: Session,
    cache: SeriesCache,
    *,
    job_id: int,
    name: str,
    points: int,
    x: XAxis = "step",
    rank: int | None = None,
    declared: str | None = None,
) -> tuple[Curve, dict[str, float | int | str | None]]:
    """A job's metric downsampled to `points` (0: raw), and its summary over every step.

    Long curves are read from their sealed rollup blocks plus the raw points after them
    (rank means only; rollups.load). `declared`: the direction the job declared for it.
    """
    stored = None
    if rank is None and points > 0:
        stored = rollups.load(session, job_id=job_id, name=name, points=points)
    full = (
        stored
        if stored is not None
        else job_curve(session, cache, job_id=job_id, name=name, rank=rank)
    )
    return downsample(full, points, x), summary(name, full, declared)


def attempt_curve(
    session: Session, cache: SeriesCache, *, attempt_id: int, name: str, rank: int | None = None
) -> Curve:
    """One attempt's metric, one value per step."""
    return per_step(cache.raw(session, attempt_id=attempt_id, name=name), rank)


def snapshot_series(
    session: Session, cache: SeriesCache, *, job_id: int, steps: int = SNAPSHOT_STEPS
) -> dict[str, dict[str, list[Any]]]:
    """Every metric of a job, per rank, at no more than about `steps` steps of its whole run.

    The steps are the union of each rank's LTTB picks (each rank gets its share of the
    budget), and every rank's value is given at each of them, so a straggler's or a
    diverging rank's extremes survive and the ranks' lines share their x values.
    """
    attempts = [a.id for a in attempts_of(session, job_id)]
    out: dict[str, dict[str, list[Any]]] = {}
    for name in reads.metric_names(session, job_id=job_id):
        raws = [cache.raw(session, attempt_id=a, name=name) for a in attempts]
        ranks = sorted({int(r) for raw in raws for r in np.unique(raw.rank)})
        by_rank = {r: merge_attempts([per_step(raw, r) for raw in raws]) for r in ranks}
        share = max(100, steps // max(1, len(ranks)))
        if max((len(c.step) for c in by_rank.values()), default=0) <= steps:
            share = 0  # every point
        picked = np.unique(np.concatenate([downsample(c, share).step for c in by_rank.values()]))
        columns: dict[str, list[Any]] = {"step": [], "time": [], "value": [], "rank": []}
        for rank, curve in by_rank.items():
            keep = np.isin(curve.step, picked)
            columns["step"] += curve.step[keep].tolist()
            columns["time"] += curve.time[keep].tolist()
            columns["value"] += curve.value[keep].tolist()
            columns["rank"] += [rank] * int(keep.sum())
        out[name] = columns
    return out


def csv_lines(session: Session, *, job_id: int, names: Sequence[str] = ()) -> Iterator[str]:
    """The job's raw points as CSV text, header first, streamed in chunks."""
    query = (
        select(
            Attempt.number,
            MetricPoint.rank,
            MetricPoint.step,
            MetricPoint.name,
            MetricPoint.value,
            MetricPoint.time,
        )  # fmt: skip
        .join(Attempt, Attempt.id == MetricPoint.attempt_id)
        .where(Attempt.job_id == job_id)
        .order_by(Attempt.number, MetricPoint.name, MetricPoint.rank, MetricPoint.step)
        .execution_options(yield_per=10_000)
    )
    if names:
        query = query.where(MetricPoint.name.in_(names))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for partition in session.execute(query).partitions():
        writer.writerows((job_id, *row) for row in partition)
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    yield buffer.getvalue()
