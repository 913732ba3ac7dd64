"""Series, comparison and CSV export of jobs' metrics (the caller checks who may read them)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.jobs.models import Attempt, Job
from backend.telemetry import rollups
from backend.telemetry.cache import SeriesCache
from backend.telemetry.curves import Curve, XAxis, downsample, merge_attempts, per_step, summary
from backend.telemetry.models import MetricPoint

CSV_COLUMNS = ["job_id", "attempt", "rank", "step", "name", "value", "time"]
#: spec keys that name a run rather than change how it trains
IDENTITY_KEYS = frozenset({"name"})


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
) -> tuple[Curve, dict[str, float | int | None]]:
    """A job's metric downsampled to `points` (0: raw), and its summary over every step.

    A settled job's long curves are read from their rollups (rank means only).
    """
    stored = None
    if rank is None and points > 0:
        stored = rollups.load(session, job_id=job_id, name=name, points=points)
    full = (
        stored
        if stored is not None
        else job_curve(session, cache, job_id=job_id, name=name, rank=rank)
    )
    return downsample(full, points, x), summary(name, full)


def attempt_curve(
    session: Session, cache: SeriesCache, *, attempt_id: int, name: str, rank: int | None = None
) -> Curve:
    """One attempt's metric, one value per step."""
    return per_step(cache.raw(session, attempt_id=attempt_id, name=name), rank)


def compare(
    session: Session,
    cache: SeriesCache,
    *,
    jobs: Sequence[Job],
    metrics: Sequence[str],
    points: int,
    x: XAxis,
) -> dict[str, Any]:
    """Spec differences, per-metric summaries and aligned downsampled curves of the jobs."""
    ids = [job.id for job in jobs]
    summaries: dict[str, dict[str, Any]] = {}
    curves: dict[str, dict[str, Any]] = {}
    for name in metrics:
        views = {i: job_view(session, cache, job_id=i, name=name, points=points, x=x) for i in ids}
        summaries[name] = {str(i): views[i][1] for i in ids}
        curves[name] = aligned({i: views[i][0] for i in ids}, x)
    return {
        "jobs": [{"id": j.id, "name": j.name, "state": j.state} for j in jobs],
        "spec_diff": spec_diff([j.spec for j in jobs]),
        "summary": summaries,
        "curves": curves,
    }


def aligned(curves: dict[int, Curve], x: XAxis) -> dict[str, Any]:
    """One shared x column and, per job, a value column with null where it has no point."""
    xs = sorted({v for c in curves.values() for v in (c.step if x == "step" else c.time).tolist()})
    where = {v: i for i, v in enumerate(xs)}
    columns: dict[str, list[float | None]] = {}
    for job_id, curve in curves.items():
        column: list[float | None] = [None] * len(xs)
        for at, value in zip(
            (curve.step if x == "step" else curve.time).tolist(), curve.value.tolist(), strict=True
        ):
            column[where[at]] = value
        columns[str(job_id)] = column
    return {"x": xs, "values": columns}


def spec_diff(specs: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    """Dotted spec keys whose values differ: one value per spec (None where absent)."""
    flat = [_flatten(spec) for spec in specs]
    keys = sorted({k for f in flat for k in f} - IDENTITY_KEYS)
    return {
        key: [f.get(key) for f in flat]
        for key in keys
        if len({json.dumps(f.get(key), sort_keys=True) for f in flat}) > 1
    }


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value} if prefix else {}


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
