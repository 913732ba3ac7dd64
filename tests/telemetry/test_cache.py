"""The series cache holds exactly what is committed, however and in whatever order it arrived."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from sqlalchemy import insert, select

from backend.db import Database
from backend.migrate import downgrade, upgrade
from backend.telemetry.ingest.store import insert_metric_points
from backend.telemetry.models import MetricPoint
from backend.telemetry.series.cache import Raw, SeriesCache, watermark
from tests.telemetry.helpers import add_attempt, point

NewAttempt = Callable[..., tuple[int, int]]


def store(db: Database, rows: list[dict[str, object]]) -> None:
    with db.session() as session:
        insert_metric_points(session, rows)


def committed(db: Database, attempt: int) -> list[tuple[int, int, float]]:
    """(step, rank, value) of every stored loss point, as the database has them."""
    query = (
        select(MetricPoint.step, MetricPoint.rank, MetricPoint.value)
        .where(MetricPoint.attempt_id == attempt, MetricPoint.name == "loss")
        .order_by(MetricPoint.step, MetricPoint.rank)
    )
    with db.session() as session:
        return [(s, r, v) for s, r, v in session.execute(query)]


def held(raw: Raw) -> list[tuple[int, int, float]]:
    return list(zip(raw.step.tolist(), raw.rank.tolist(), raw.value.tolist(), strict=True))


def test_late_replayed_and_plain_rows_all_reach_the_cache_once(
    database: Database, new_attempt: NewAttempt
) -> None:
    _, attempt = new_attempt()
    cache = SeriesCache()

    def read() -> Raw:
        with database.session() as session:
            return cache.raw(session, attempt_id=attempt, name="loss")

    assert len(read()) == 0
    store(database, [point(attempt, s, rank=r) for s in range(100) for r in (0, 1)])
    first = read()
    assert held(first) == committed(database, attempt)
    assert read() is first  # nothing committed since: the same arrays, no read

    store(database, [point(attempt, s, rank=2) for s in range(40, 110)])  # a rank that lagged
    assert held(read()) == committed(database, attempt)
    store(database, [point(attempt, s, rank=r) for s in range(105, 200) for r in (0, 1, 2)])
    store(database, [point(attempt, s, rank=3) for s in range(64)])  # a replay from far back
    with database.session() as session:  # and a plain INSERT below everything held
        session.execute(insert(MetricPoint), [point(attempt, 0, rank=9)])
    assert held(read()) == committed(database, attempt)
    assert len(read()) == 200 + 70 + (285 - 5) + 64 + 1  # rank 2's steps 105..109 came twice


def test_the_watermark_moves_only_when_the_series_gets_rows(
    database: Database, new_attempt: NewAttempt
) -> None:
    _, attempt = new_attempt()

    def now(name: str = "loss") -> int:
        with database.session() as session:
            return watermark(session, attempt_id=attempt, name=name)

    assert now() == 0
    store(database, [point(attempt, s) for s in range(100)])
    before = now()
    store(database, [point(attempt, s, name="lr") for s in range(100)])
    store(database, [point(attempt, s) for s in range(50)])  # all already there
    assert now() == before and now("lr") > before
    store(database, [point(attempt, 100)])
    assert now() > before


def test_points_stored_before_the_migration_are_marked_and_survive_a_downgrade(
    db_url: str,
) -> None:
    database = Database(db_url)
    try:
        _, attempt = add_attempt(database)  # with today's models, before going back to 0006
        database.engine.dispose()
        downgrade(db_url, "0006")
        with database.session() as session:
            session.execute(
                insert(MetricPoint.__table__).values(
                    [
                        {k: v for k, v in point(attempt, s, rank=r).items()}
                        for s in range(10)
                        for r in range(2)
                    ]
                )
            )
        upgrade(db_url)
        with database.session() as session:
            raw = SeriesCache().raw(session, attempt_id=attempt, name="loss")
        assert np.array_equal(raw.step, np.repeat(np.arange(10), 2))
        downgrade(db_url, "0006")
        upgrade(db_url)
        assert held(raw) == committed(database, attempt)
    finally:
        database.dispose()
