"""Synthetic loss curves for the series tests: random walks written straight to metric_points."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
from sqlalchemy import update

from backend.db import Database, utcnow
from backend.jobs.models import Attempt
from backend.telemetry.series.curves import Curve


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
    with db.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO metric_points (attempt_id, rank, step, name, value, time)"
            " VALUES (%s, %s, %s, %s, %s, %s)".replace(
                "%s", "?" if db.url.startswith("sqlite") else "%s"
            ),
            rows,
        )


def finish(db: Database, attempt_id: int, *, seconds_ago: float = 3600) -> None:
    with db.session() as session:
        session.execute(
            update(Attempt)
            .where(Attempt.id == attempt_id)
            .values(state="succeeded", finished_at=utcnow() - timedelta(seconds=seconds_ago))
        )
