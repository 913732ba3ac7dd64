"""Writing telemetry rows idempotently: a replayed row is skipped, never duplicated."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from backend.db import Base

#: rows per INSERT statement (SQLite allows 32,766 bound parameters per statement)
CHUNK = 2000


def insert_ignoring_duplicates(
    session: Session, model: type[Base], rows: Sequence[dict[str, Any]]
) -> None:
    """INSERT ... ON CONFLICT DO NOTHING in chunks, for PostgreSQL and SQLite alike."""
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    table: Any = model.__table__
    width = max(1, len(rows[0]))
    chunk = max(1, min(CHUNK, 30_000 // width))
    for start in range(0, len(rows), chunk):
        statement = insert(table).values(list(rows[start : start + chunk])).on_conflict_do_nothing()
        session.execute(statement)
