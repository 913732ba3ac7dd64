"""Storing metric points: once each whatever path they take, marked as the series cache needs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from sqlalchemy import insert, select, text

from backend.db import Database
from backend.telemetry.ingest import pgcopy
from backend.telemetry.ingest.store import (
    COPY_THRESHOLD,
    SQLITE_ROWS,
    insert_ignoring_duplicates,
    insert_metric_points,
)
from backend.telemetry.ingest.writer import write_batch
from backend.telemetry.models import DeviceSample, MetricPoint
from tests.telemetry.helpers import count_points, point
from workers.contract.protocol import DEVICES_STREAM, EVENTS_STREAM, LOGS_STREAM, METRICS_STREAM

NewAttempt = Callable[..., tuple[int, int]]


def store(db: Database, rows: list[dict[str, Any]]) -> None:
    with db.session() as session:
        insert_metric_points(session, rows)


def marked(db: Database) -> list[tuple[int, str, int, int]]:
    query = (
        select(MetricPoint.attempt_id, MetricPoint.name, MetricPoint.step, MetricPoint.rank)
        .where(MetricPoint.mark)
        .order_by(MetricPoint.id)
    )
    with db.session() as session:
        return [(a, n, s, r) for a, n, s, r in session.execute(query)]


def test_points_go_in_once_and_the_first_copy_of_a_point_stays(
    database: Database, new_attempt: NewAttempt
) -> None:
    _, attempt = new_attempt()
    store(database, [point(attempt, s, rank=r) for s in range(200) for r in range(2)])
    again = [point(attempt, s, rank=r) for s in range(150, 300) for r in range(2)]
    for row in again:
        row["value"] = -1.0  # a replay must not overwrite what is stored
    store(database, again)  # 100 duplicates: PostgreSQL's COPY fails, the fallback skips them
    store(database, again[:5] + again[:5])  # duplicates within one small batch
    assert count_points(database) == 600
    with database.session() as session:
        values = dict(
            session.execute(
                select(MetricPoint.step, MetricPoint.value).where(MetricPoint.rank == 0)
            ).all()
        )
    assert values[199] == pytest.approx(1 / 200) and values[200] == -1.0


def test_a_batch_that_all_went_in_marks_each_series_lowest_step_and_a_replay_marks_all(
    database: Database, new_attempt: NewAttempt
) -> None:
    _, first = new_attempt()
    _, second = new_attempt()
    rows = [point(first, s, rank=r) for s in range(100, 200) for r in (1, 0)]
    rows += [point(second, s, name=n) for s in range(50) for n in ("lr", "loss")]
    store(database, rows[::-1])
    # every row went in (COPY, or SQLite's INSERT OR IGNORE skipping none): one marked row
    # per series, at its lowest step
    assert sorted(marked(database)) == [
        (first, "loss", 100, 0),
        (second, "loss", 0, 0),
        (second, "lr", 0, 0),
    ]
    before = len(marked(database))
    store(database, [point(first, s) for s in range(190, 190 + COPY_THRESHOLD)])  # 10 repeats
    assert len(marked(database)) == before + COPY_THRESHOLD - 10
    # a replay whose lowest step is the skipped one still marks the rows it added
    store(database, [point(first, s, rank=2) for s in (250, 251)])
    store(database, [point(first, s, rank=2) for s in (250, 252, 253)])
    assert {step for _, _, step, rank in marked(database) if rank == 2} >= {250, 252, 253}


def test_a_replay_of_several_statements_adds_only_its_new_rows_and_marks_them(
    database: Database, new_attempt: NewAttempt
) -> None:
    _, attempt = new_attempt()
    store(database, [point(attempt, s) for s in range(150)])
    # 2.5 statements' worth on SQLite (SQLITE_ROWS a statement): 50 replays, 200 new rows
    store(database, [point(attempt, s) for s in range(100, 100 + 2 * SQLITE_ROWS + 50)])
    assert count_points(database) == 150 + 2 * SQLITE_ROWS
    assert {step for _, _, step, _ in marked(database)} >= set(range(150, 150 + 2 * SQLITE_ROWS))


@pytest.mark.parametrize("db_url", ["migrated_postgres_url"], indirect=True, ids=["postgres"])
def test_binary_copy_round_trips_every_column_kind(database: Database) -> None:
    rows = [
        (-(2**31), 2**31 - 1, 2**40, "loss", 1.5, True),
        (0, 7, -(2**62), "é/grad_norm", -0.0, False),
        (5, 1, 3, "x" * 128, float("inf"), True),
    ]
    formats = [">i4", ">i4", ">i8", "text", ">f8", "?"]
    data = pgcopy.encode(formats, [[r[i] for r in rows] for i in range(6)], len(rows))
    assert data is not None
    raw: Any = psycopg.connect(database.url.replace("postgresql+psycopg", "postgresql"))
    with raw, raw.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE t (a int4, b int4, c int8, n text, v float8, m bool)")
        with cursor.copy("COPY t FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(data)
        assert sorted(cursor.execute("SELECT * FROM t").fetchall()) == sorted(rows)


def test_values_the_encoder_cannot_write_are_left_to_write_row() -> None:
    assert pgcopy.encode([">f8"], [[1.0, None]], 2) is None  # None is not NaN
    assert pgcopy.encode([">i8"], [[1, None]], 2) is None  # a NULL integer (an idle device)
    assert pgcopy.encode(["text"], [["a", None]], 2) is None
    many = [f"line {i}" for i in range(pgcopy.MAX_DISTINCT_TEXTS + 1)]
    assert pgcopy.encode(["text"], [many], len(many)) is None
    with pytest.raises(OverflowError):
        pgcopy.encode([">i4"], [[2**31]], 1)


def test_device_samples_with_missing_fields_are_stored_row_by_row(database: Database) -> None:
    samples = [
        {"node": "n", "device": d, "kind": "gpu", "time": 1.0 + t, "util": None, "power": 3.0}
        for t in range(COPY_THRESHOLD)
        for d in range(2)
    ]
    for sample in samples:  # a rank on device 0; none on device 1 (a NULL integer)
        sample["rank"] = None if sample["device"] else 0
    for _ in range(2):  # the second time, every row is a duplicate
        with database.session() as session:
            insert_ignoring_duplicates(session, DeviceSample, samples)
    with database.session() as session:
        count = session.scalar(text("SELECT count(*) FROM device_samples WHERE util IS NULL"))
    assert count == 2 * COPY_THRESHOLD


def test_points_of_an_attempt_nobody_knows_are_not_stored_and_plain_inserts_are_marked(
    database: Database, new_attempt: NewAttempt
) -> None:
    _, attempt = new_attempt()
    items: dict[str, list[Any]] = {DEVICES_STREAM: [], EVENTS_STREAM: [], LOGS_STREAM: []}
    items[METRICS_STREAM] = [point(attempt, s) for s in range(COPY_THRESHOLD)]
    items[METRICS_STREAM].append(point(attempt + 99, 0))
    with database.session() as session:
        write_batch(session, items)
    assert count_points(database) == COPY_THRESHOLD
    with database.session() as session:  # a plain INSERT marks its rows: the cache sees them
        session.execute(insert(MetricPoint), [point(attempt, COPY_THRESHOLD)])
    steps = [step for _, _, step, _ in marked(database)]
    assert steps == [0, COPY_THRESHOLD]


def ids_in_insert_order(database: Database) -> list[tuple[int, int]]:
    with database.session() as session:
        query = select(MetricPoint.id, MetricPoint.step).order_by(MetricPoint.id)
        return [(i, s) for i, s in session.execute(query)]


@pytest.mark.parametrize("db_url", ["migrated_postgres_url"], indirect=True, ids=["postgres"])
@pytest.mark.parametrize("increment", [1024, 1], ids=["migrated", "increment-1"])
def test_copied_points_take_ids_in_blocks_that_nothing_else_gets(
    database: Database, new_attempt: NewAttempt, increment: int
) -> None:
    with database.session() as session:
        session.execute(text(f"ALTER SEQUENCE metric_points_id_seq INCREMENT BY {increment}"))
    _, attempt = new_attempt()
    steps = iter(range(10_000))
    for size in (3000, 1, COPY_THRESHOLD, 1, 1500):  # COPY, default, COPY, default, COPY
        with database.session() as session:
            if size == 1:  # the column's default: a nextval of its own
                session.execute(insert(MetricPoint), [point(attempt, next(steps))])
            else:
                insert_metric_points(session, [point(attempt, next(steps)) for _ in range(size)])
    rows = ids_in_insert_order(database)
    assert len(rows) == len({i for i, _ in rows}) == 3000 + 1 + COPY_THRESHOLD + 1 + 1500
    assert [s for _, s in rows] == sorted(s for _, s in rows)  # ids follow the writes' order
