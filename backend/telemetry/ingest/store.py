"""Writing telemetry rows idempotently: a replayed row is skipped, never duplicated.

PostgreSQL: the common case has no duplicates, so the rows are COPied (binary, built
by `pgcopy`) straight into the table inside a savepoint: one write per row. A unique
violation rolls back to the savepoint and the rows take the idempotent path: COPY into
a per-connection staging table, then INSERT ... SELECT ... ON CONFLICT DO NOTHING.
SQLite: one executemany of INSERT OR IGNORE (the engine runs in WAL mode); metric points
straight from their columns, marked as the COPY marks them unless a row was skipped. All of it
runs inside the caller's transaction, so the rows commit (or roll back) with the rest
of the batch.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from itertools import chain, islice
from operator import itemgetter
from typing import Any

import numpy as np
import psycopg
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from backend.db import Base
from backend.telemetry.ingest import pgcopy
from backend.telemetry.ingest.points import Points
from backend.telemetry.models import MetricPoint

#: below this many rows a multi-row VALUES insert beats setting up a COPY
COPY_THRESHOLD = 64
#: rows per VALUES statement (SQLite allows 32,766 bound parameters per statement)
CHUNK = 2000
#: metric points per INSERT statement on SQLite (7 parameters each)
SQLITE_ROWS = 100
#: what a metric point item holds, in the order of the Points columns
POINT_COLUMNS = ["attempt_id", "rank", "step", "name", "value", "time"]
Rows = Sequence[dict[str, Any]]


def insert_ignoring_duplicates(session: Session, model: type[Base], rows: Rows) -> int:
    """Insert rows (all with the same keys), skipping those whose unique key exists; how
    many went in."""
    if not rows:
        return 0
    table: Any = model.__table__
    if session.get_bind().dialect.name == "postgresql" and len(rows) >= COPY_THRESHOLD:
        return _copy_postgres(session, table, list(rows[0]), rows)
    return _insert(session, table, rows)


def insert_metric_points(session: Session, points: Points | Rows) -> None:
    """Insert metric points idempotently, marking rows as the series cache needs.

    When every row goes in as given (the COPY path), only each series' lowest-step row
    is marked; any path that may skip duplicates leaves every row marked (the default).
    """
    if not len(points):
        return
    table: Any = MetricPoint.__table__
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql" and len(points) >= COPY_THRESHOLD:
        points = points if isinstance(points, Points) else Points.of(points)
        _copy_postgres(session, table, POINT_COLUMNS, points.rows, points)
    elif dialect == "sqlite":
        _insert_sqlite_points(session, Points.of(points))
    else:
        _insert(session, table, points.dicts() if isinstance(points, Points) else points)


def _insert_sqlite_points(session: Session, points: Points) -> None:
    """INSERT OR IGNORE marking each series' lowest-step row; if any row was a duplicate
    (skipped), every row this call added is marked afterwards.

    Rows come straight from the columns (no dict per row), and the marks index holds one
    entry per series and round instead of one per row: 1.36 µs a row against 1.99
    (docs/benchmarks.md, "Telemetry ingest throughput"). They go `SQLITE_ROWS` to a
    statement: 1.7-2.0 µs a row against 4.1-4.8 for one row a statement (the same
    section, 2026-11-29 fifth session). The rows added are the newest ids: SQLite gives a
    new row the largest rowid plus one and has one writer, so this call's rows are the
    `inserted` highest ids.
    """
    columns = [*POINT_COLUMNS, "mark"]

    def statement(rows: int) -> str:
        one = f"({', '.join('?' for _ in columns)})"
        return f"INSERT OR IGNORE INTO metric_points ({', '.join(columns)}) VALUES " + ", ".join(
            [one] * rows
        )

    values = [
        getattr(points, name).tolist() if name != "name" else points.name for name in POINT_COLUMNS
    ]
    # marks as ints: sqlite3 binds an exact int directly and adapts a bool (0.3 µs a row)
    marks = points.series_marks().astype(np.int64).tolist()
    rows = zip(*values, marks, strict=True)
    count = len(points)
    whole = count - count % SQLITE_ROWS
    # each statement's parameters are its rows' values in a row: one list built at a time
    batches = (
        list(chain.from_iterable(islice(rows, SQLITE_ROWS))) for _ in range(whole // SQLITE_ROWS)
    )
    raw: Any = session.connection().connection.driver_connection
    cursor = raw.cursor()
    try:
        cursor.executemany(statement(SQLITE_ROWS), batches)
        inserted = cursor.rowcount  # executemany: the rows inserted, summed
        if whole < count:
            cursor.execute(statement(count - whole), list(chain.from_iterable(rows)))
            inserted += cursor.rowcount
        if 0 < inserted < count:
            cursor.execute(
                "UPDATE metric_points SET mark = 1"
                " WHERE id > (SELECT max(id) FROM metric_points) - ? AND NOT mark",
                (inserted,),
            )
    finally:
        cursor.close()


def _insert(session: Session, table: Any, rows: Rows) -> int:
    """INSERT OR IGNORE (SQLite), else multi-row INSERT ... ON CONFLICT DO NOTHING; how many
    rows went in."""
    columns = list(rows[0])
    connection = session.connection()
    if session.get_bind().dialect.name == "sqlite":
        marks = ", ".join("?" for _ in columns)
        statement = f"INSERT OR IGNORE INTO {table.name} ({', '.join(columns)}) VALUES ({marks})"
        done = connection.exec_driver_sql(statement, list(map(_getter(columns), rows)))
        return int(done.rowcount)  # executemany: the rows inserted, summed
    chunk = max(1, min(CHUNK, 30_000 // max(1, len(columns))))
    inserted = 0
    for start in range(0, len(rows), chunk):
        values = list(rows[start : start + chunk])
        insert = postgresql.insert(table).values(values).on_conflict_do_nothing()
        inserted += connection.execute(insert).rowcount
    return inserted


def _getter(columns: list[str]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """row → tuple of its values in column order (itemgetter: ~3x a generator per row)."""
    if len(columns) == 1:
        return lambda row: (row[columns[0]],)
    return itemgetter(*columns)


def _copy_postgres(
    session: Session, table: Any, columns: list[str], rows: Rows, points: Points | None = None
) -> int:
    """COPY the rows in (see the module's docstring); how many went in."""
    raw: Any = session.connection().connection.driver_connection
    names = ", ".join(columns)
    given = None if points is None else [getattr(points, name) for name in columns]
    with raw.cursor() as cursor:
        # the common case has no duplicates: one COPY straight into the table
        cursor.execute("SAVEPOINT tb_copy")
        try:
            if points is None:
                _copy(cursor, table, columns, rows)
            else:
                ids = _take_ids(cursor, table.name, len(points))
                marked = [ids, *(given or []), points.series_marks()]
                _copy(cursor, table, ["id", *columns, "mark"], rows, given=marked)
        except psycopg.errors.UniqueViolation:
            cursor.execute("ROLLBACK TO SAVEPOINT tb_copy")
            # one staging table per column set, created once per connection
            stage = f"_tb_stage_{table.name}_{zlib.crc32(names.encode()):08x}"
            cursor.execute(
                f"CREATE TEMP TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS "
                f"AS SELECT {names} FROM {table.name} WITH NO DATA"
            )
            _copy(cursor, table, columns, rows, into=stage, given=given)
            cursor.execute(
                f"INSERT INTO {table.name} ({names}) SELECT {names} FROM {stage}"
                " ON CONFLICT DO NOTHING"
            )
            inserted = cursor.rowcount
        else:
            inserted = len(rows)
        cursor.execute("RELEASE SAVEPOINT tb_copy")
    return int(inserted)


def _take_ids(cursor: Any, table: str, count: int) -> np.ndarray:
    """`count` new ids from the table's id sequence, in increasing order.

    One `nextval` hands out a block of the sequence's increment (1024, migration 0008): it
    returns the block's first id and nobody else gets the next 1023, instead of a nextval per
    row (the column's default; its cost: docs/benchmarks.md). With increment 1 (a database
    made without the migrations) this is a nextval per row again, still correct.
    """
    cursor.execute(
        "SELECT nextval(seqrelid), seqincrement"
        " FROM pg_sequence, generate_series(1, ceil(%(n)s::float8 / seqincrement)::int)"
        " WHERE seqrelid = pg_get_serial_sequence(%(t)s, 'id')::regclass",
        {"t": table, "n": count},
    )
    taken = cursor.fetchall()
    block = int(taken[0][1])
    firsts = np.array([first for first, _ in taken], dtype=np.int64)
    return (firsts[:, None] + np.arange(block, dtype=np.int64)).ravel()[:count]


def _copy(
    cursor: Any,
    table: Any,
    columns: list[str],
    rows: Rows,
    *,
    into: str | None = None,
    given: list[Any] | None = None,
) -> None:
    """COPY rows into table (or its staging table `into`): binary when pgcopy can build it.

    `given`, when there, is every column's values (numpy arrays or lists), ready made.
    """
    names = ", ".join(columns)
    target = into or table.name
    formats = [pgcopy.column_format(table.c[name]) for name in columns]
    parts = None
    if None not in formats:
        values = given or [map(itemgetter(name), rows) for name in columns]
        parts = pgcopy.encode_parts([f for f in formats if f is not None], values, len(rows))
    if parts is not None:
        with cursor.copy(f"COPY {target} ({names}) FROM STDIN (FORMAT BINARY)") as copy:
            for part in parts:  # the server parses each while the next is encoded
                copy.write(part)
        return
    tuples: Any = map(_getter(columns), rows)
    if given is not None:  # it may hold a column the rows do not (mark)
        lists = [v.tolist() if isinstance(v, np.ndarray) else v for v in given]
        tuples = zip(*lists, strict=True)
    with cursor.copy(f"COPY {target} ({names}) FROM STDIN") as copy:
        for values in tuples:
            copy.write_row(values)
