"""Writing telemetry rows idempotently: a replayed row is skipped, never duplicated.

PostgreSQL: the common case has no duplicates, so the rows are COPied (binary, built
by `pgcopy`) straight into the table inside a savepoint: one write per row. A unique
violation rolls back to the savepoint and the rows take the idempotent path: COPY into
a per-connection staging table, then INSERT ... SELECT ... ON CONFLICT DO NOTHING.
SQLite: one executemany of INSERT OR IGNORE (the engine runs in WAL mode). All of it
runs inside the caller's transaction, so the rows commit (or roll back) with the rest
of the batch.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

import numpy as np
import psycopg
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from backend.db import Base
from backend.telemetry import pgcopy
from backend.telemetry.models import MetricPoint

#: below this many rows a multi-row VALUES insert beats setting up a COPY
COPY_THRESHOLD = 64
#: rows per VALUES statement (SQLite allows 32,766 bound parameters per statement)
CHUNK = 2000
Rows = Sequence[dict[str, Any]]


def insert_ignoring_duplicates(session: Session, model: type[Base], rows: Rows) -> None:
    """Insert rows (all with the same keys), skipping those whose unique key exists."""
    _insert(session, model.__table__, rows, marks=None)


def insert_metric_points(session: Session, rows: Rows) -> None:
    """Insert metric points idempotently, marking rows as the series cache needs.

    When every row goes in as given (the COPY path), only each series' lowest-step row
    is marked; any path that may skip duplicates leaves every row marked (the default).
    """
    _insert(session, MetricPoint.__table__, rows, marks=series_marks)


def series_marks(rows: Rows) -> np.ndarray:
    """One bool per row: true for the first lowest-step row of each (attempt_id, name)."""
    count = len(rows)
    attempts = np.fromiter(map(itemgetter("attempt_id"), rows), np.int64, count)
    listed = list(map(itemgetter("name"), rows))
    names = dict.fromkeys(listed, 0)
    for code, name in enumerate(names):
        names[name] = code
    codes = np.fromiter(map(names.__getitem__, listed), np.int64, count)
    steps = np.fromiter(map(itemgetter("step"), rows), np.int64, count)
    series = attempts * len(names) + codes
    order = np.lexsort((steps, series))
    ordered = series[order]
    first = order[np.r_[True, ordered[1:] != ordered[:-1]]]
    marks = np.zeros(count, dtype=bool)
    marks[first] = True
    return marks


def _insert(
    session: Session, table: Any, rows: Rows, marks: Callable[[Rows], np.ndarray] | None
) -> None:
    if not rows:
        return
    columns = list(rows[0])
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql" and len(rows) >= COPY_THRESHOLD:
        _copy_postgres(session, table, columns, rows, marks)
    elif dialect == "sqlite":
        marks_ = ", ".join("?" for _ in columns)
        statement = f"INSERT OR IGNORE INTO {table.name} ({', '.join(columns)}) VALUES ({marks_})"
        session.connection().exec_driver_sql(statement, list(map(_getter(columns), rows)))
    else:
        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        chunk = max(1, min(CHUNK, 30_000 // max(1, len(columns))))
        for start in range(0, len(rows), chunk):
            values = list(rows[start : start + chunk])
            session.execute(insert(table).values(values).on_conflict_do_nothing())


def _getter(columns: list[str]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """row → tuple of its values in column order (itemgetter: ~3x a generator per row)."""
    if len(columns) == 1:
        return lambda row: (row[columns[0]],)
    return itemgetter(*columns)


def _copy_postgres(
    session: Session,
    table: Any,
    columns: list[str],
    rows: Rows,
    marks: Callable[[Rows], np.ndarray] | None,
) -> None:
    raw: Any = session.connection().connection.driver_connection
    names = ", ".join(columns)
    with raw.cursor() as cursor:
        # the common case has no duplicates: one COPY straight into the table
        cursor.execute("SAVEPOINT tb_copy")
        try:
            if marks is None:
                _copy(cursor, table, columns, rows)
            else:
                _copy(cursor, table, [*columns, "mark"], rows, extra=marks(rows))
        except psycopg.errors.UniqueViolation:
            cursor.execute("ROLLBACK TO SAVEPOINT tb_copy")
            # one staging table per column set, created once per connection
            stage = f"_tb_stage_{table.name}_{zlib.crc32(names.encode()):08x}"
            cursor.execute(
                f"CREATE TEMP TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS "
                f"AS SELECT {names} FROM {table.name} WITH NO DATA"
            )
            _copy(cursor, table, columns, rows, into=stage)
            cursor.execute(
                f"INSERT INTO {table.name} ({names}) SELECT {names} FROM {stage}"
                " ON CONFLICT DO NOTHING"
            )
        cursor.execute("RELEASE SAVEPOINT tb_copy")


def _copy(
    cursor: Any,
    table: Any,
    columns: list[str],
    rows: Rows,
    *,
    extra: np.ndarray | None = None,
    into: str | None = None,
) -> None:
    """COPY rows into table (or its staging table `into`): binary when pgcopy can build it.

    `extra`, when given, is the values of the last column, which the rows do not hold.
    """
    names = ", ".join(columns)
    target = into or table.name
    given = columns if extra is None else columns[:-1]
    formats = [pgcopy.column_format(table.c[name]) for name in columns]
    data = None
    if None not in formats:
        values: list[Any] = [map(itemgetter(name), rows) for name in given]
        if extra is not None:
            values.append(extra)
        data = pgcopy.encode([f for f in formats if f is not None], values, len(rows))
    if data is not None:
        with cursor.copy(f"COPY {target} ({names}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(data)
        return
    tuples: Any = map(_getter(given), rows)
    if extra is not None:
        tuples = ((*t, bool(m)) for t, m in zip(tuples, extra.tolist(), strict=True))
    with cursor.copy(f"COPY {target} ({names}) FROM STDIN") as copy:
        for values in tuples:
            copy.write_row(values)
