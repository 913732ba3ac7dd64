"""Reading metric series, logs and device samples back out of the database."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from backend.jobs.models import Attempt
from backend.telemetry.models import DeviceSample, LogLine, MetricPoint

SNAPSHOT_LOG_LINES = 300


# a loose index scan: one probe of the (attempt_id, name, ...) key per name, where
# DISTINCT would read every point of the attempt
ATTEMPT_NAMES = text(
    "WITH RECURSIVE names(name) AS ("
    " SELECT min(name) FROM metric_points WHERE attempt_id = :attempt"
    " UNION ALL SELECT (SELECT min(m.name) FROM metric_points m"
    "  WHERE m.attempt_id = :attempt AND m.name > names.name)"
    " FROM names WHERE names.name IS NOT NULL"
    ") SELECT name FROM names WHERE name IS NOT NULL"
)


def metric_names(session: Session, *, job_id: int) -> list[str]:
    """The names of the job's metrics, sorted."""
    attempts = session.scalars(select(Attempt.id).where(Attempt.job_id == job_id))
    names = {n for a in attempts for n in session.scalars(ATTEMPT_NAMES, {"attempt": a})}
    return sorted(names)


def series(
    session: Session, *, job_id: int, name: str, rank: int | None = None
) -> dict[str, list[Any]]:
    """One columnar series by step; a later attempt's points replace an earlier one's.

    Without a rank, each step's value is the mean over ranks (the global loss of a
    data-parallel step).
    """
    query = (
        select(
            Attempt.number,
            MetricPoint.step,
            func.avg(MetricPoint.value),
            func.max(MetricPoint.time),
        )
        .join(Attempt, Attempt.id == MetricPoint.attempt_id)
        .where(Attempt.job_id == job_id, MetricPoint.name == name)
        .group_by(Attempt.number, MetricPoint.step)
        .order_by(Attempt.number, MetricPoint.step)
    )
    if rank is not None:
        query = query.where(MetricPoint.rank == rank)
    by_step: dict[int, tuple[float, float]] = {}
    for _number, step, value, moment in session.execute(query):
        by_step[step] = (float(moment), float(value))
    steps = sorted(by_step)
    return {
        "step": steps,
        "time": [by_step[s][0] for s in steps],
        "value": [by_step[s][1] for s in steps],
    }


def recent_logs(
    session: Session,
    *,
    job_id: int,
    limit: int = SNAPSHOT_LOG_LINES,
    contains: str | None = None,
    rank: int | None = None,
) -> list[dict[str, Any]]:
    """The job's newest `limit` lines (of every attempt), oldest first.

    `contains`: only lines holding this text, any case (searched over every stored line);
    `rank`: only that rank's lines.
    """
    query = (
        select(LogLine)
        .join(Attempt, Attempt.id == LogLine.attempt_id)
        .where(Attempt.job_id == job_id)
        .order_by(LogLine.id.desc())
        .limit(limit)
    )
    if contains:
        query = query.where(LogLine.line.icontains(contains, autoescape=True))
    if rank is not None:
        query = query.where(LogLine.rank == rank)
    return [
        {
            "attempt_id": r.attempt_id,
            "rank": r.rank,
            "stream": r.stream,
            "seq": r.seq,
            "line": r.line,
            "time": r.time,
        }
        for r in reversed(session.scalars(query).all())
    ]


def recent_samples(session: Session, *, seconds: float = 300.0) -> list[dict[str, Any]]:
    """Device samples of the last few minutes, oldest first."""
    newest = session.scalar(select(func.max(DeviceSample.time)))
    if newest is None:
        return []
    query = (
        select(DeviceSample)
        .where(DeviceSample.time >= newest - seconds)
        .order_by(DeviceSample.time)
    )
    return [
        {
            "node": s.node,
            "device": s.device,
            "kind": s.kind,
            "time": s.time,
            "util": s.util,
            "mem_used": s.mem_used,
            "mem_total": s.mem_total,
            "temperature": s.temperature,
            "power": s.power,
            "attempt_id": s.attempt_id,
            "rank": s.rank,
        }
        for s in session.scalars(query)
    ]
