"""Synthetic loss curves for the series tests: random walks written straight to metric_points."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
from sqlalchemy import select, update

from backend.db import Database, utcnow
from backend.jobs.models import Attempt
from backend.telemetry.models import CurveBlock
from backend.telemetry.series import rollups
from backend.telemetry.series.cache import SeriesCache
from backend.telemetry.series.curves import Curve
from backend.telemetry.series.queries import job_curve


def walk(count: int, seed: int = 0, start: int = 0) -> Curve:
    step = np.arange(start, start + count, dtype=np.int64)
    value = np.random.default_rng(seed).standard_normal(count).cumsum()
    return Curve(step, 1.7e9 + step * 0.01, value)


def error(shown: Curve, full: Curve) -> float:
    """Mean distance of the line through `shown` from every point, over the value range."""
    drawn = np.interp(full.step, shown.step, shown.value)
    return float(np.abs(drawn - full.value).mean() / np.ptp(full.value))


def fill(db: Database, attempt_id: int, curve: Curve, ranks: int = 1, first_rank: int = 0) -> None:
    """`curve` as ranks `first_rank`, ... log it: each adds its rank to the value."""
    rows = [
        (attempt_id, rank, int(s), "loss", float(v) + rank, float(t))
        for rank in range(first_rank, first_rank + ranks)
        for s, t, v in zip(curve.step, curve.time, curve.value, strict=True)
    ]
    columns = "metric_points (attempt_id, rank, step, name, value, time)"
    with db.engine.begin() as conn:
        if db.url.startswith("sqlite"):
            conn.exec_driver_sql(f"INSERT INTO {columns} VALUES (?, ?, ?, ?, ?, ?)", rows)
            return
        # the same rows as that INSERT, in a tenth of the time (120,000 rows: ~2 s)
        driver: Any = conn.connection.driver_connection
        with driver.cursor() as cursor, cursor.copy(f"COPY {columns} FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


def finish(db: Database, attempt_id: int, *, seconds_ago: float = 3600) -> None:
    with db.session() as session:
        session.execute(
            update(Attempt)
            .where(Attempt.id == attempt_id)
            .values(state="succeeded", finished_at=utcnow() - timedelta(seconds=seconds_ago))
        )


def blocks_match_the_curve(database: Database, job: int) -> None:
    """Each stored block holds exactly the extremes of the raw curve's points in its range."""
    with database.session() as session:
        raw = job_curve(session, SeriesCache(), job_id=job, name="loss")
        stored = session.scalars(select(CurveBlock).where(CurveBlock.job_id == job)).all()
    assert stored
    for block in stored:
        inside = (raw.step >= block.start_step) & (raw.step < block.end_step)
        part = Curve(raw.step[inside], raw.time[inside], raw.value[inside])
        expected = rollups.bucket_extremes(part, block.width)
        assert np.array_equal(rollups.extremes_of(block), expected)
        assert (block.first_step, block.last_step) == (part.step[0], part.step[-1])
