"""Writing telemetry rows idempotently: a replayed row is skipped, never duplicated.

PostgreSQL: COPY into a per-connection staging table, then one
INSERT ... SELECT ... ON CONFLICT DO NOTHING. SQLite: one executemany of
INSERT OR IGNORE (the engine runs in WAL mode). Both run inside the caller's
transaction, so the rows commit (or roll back) with the rest of the batch.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from backend.db import Base

#: below this many rows a multi-row VALUES insert beats setting up a COPY
COPY_THRESHOLD = 64
#: rows per VALUES statement (SQLite allows 32,766 bound parameters per statement)
CHUNK = 2000


def insert_ignoring_duplicates(
    session: Session, model: type[Base], rows: Sequence[dict[str, Any]]
) -> None:
    """Insert rows (all with the same keys), skipping those whose unique key exists."""
    if not rows:
        return
    table: Any = model.__table__
    columns = list(rows[0])
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql" and len(rows) >= COPY_THRESHOLD:
        _copy_postgres(session, table.name, columns, rows)
    elif dialect == "sqlite":
        marks = ", ".join("?" for _ in columns)
        statement = f"INSERT OR IGNORE INTO {table.name} ({', '.join(columns)}) VALUES ({marks})"
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
    session: Session, table: str, columns: list[str], rows: Sequence[dict[str, Any]]
) -> None:
    raw: Any = session.connection().connection.driver_connection
    names = ", ".join(columns)
    # one staging table per column set, created once per connection (a no-op afterwards)
    stage = f"_tb_stage_{table}_{zlib.crc32(names.encode()):08x}"
    with raw.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS "
            f"AS SELECT {names} FROM {table} WITH NO DATA"
        )
        with cursor.copy(f"COPY {stage} ({names}) FROM STDIN") as copy:
            for values in map(_getter(columns), rows):
                copy.write_row(values)
        cursor.execute(
            f"INSERT INTO {table} ({names}) SELECT {names} FROM {stage} ON CONFLICT DO NOTHING"
        )
