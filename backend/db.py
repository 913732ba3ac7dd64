"""Database engine, session factory and the declarative base."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Dialect,
    Engine,
    MetaData,
    String,
    TypeDecorator,
    create_engine,
    event,
)
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def fields_of(row: object, names: str) -> dict[str, Any]:
    """The attributes of an ORM row named in `names` (space-separated), for the response
    model's fields of the same names."""
    return {name: getattr(row, name) for name in names.split()}


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; they were written as UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """DateTime(timezone=True) that reads back aware UTC datetimes on SQLite too."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return as_utc(value) if value is not None else None


class StrEnumText(TypeDecorator[Any]):
    """A StrEnum stored as its value in a VARCHAR; reads back the member (a bad value raises)."""

    impl = String
    cache_ok = True

    def __init__(self, enum: type[StrEnum], length: int) -> None:
        super().__init__(length)
        self.enum = enum

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else self.enum(value).value

    def process_result_value(self, value: Any, dialect: Dialect) -> StrEnum | None:
        return None if value is None else self.enum(value)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON, datetime: UtcDateTime()}


#: connections one engine keeps open, and the most it opens at once (the API's request slots
#: and its background loops fit in them: backend/request_slots.py)
POOL_SIZE = 10
POOL_CONNECTIONS = 40
POOL_TIMEOUT_SECONDS = 30
POOL_ARGUMENTS: dict[str, Any] = {
    "pool_size": POOL_SIZE,
    "max_overflow": POOL_CONNECTIONS - POOL_SIZE,
    "pool_timeout": POOL_TIMEOUT_SECONDS,
}


def make_engine(url: str) -> Engine:
    """An engine; SQLite gets WAL, foreign keys and a busy timeout for concurrent writers."""
    if url.startswith("sqlite"):
        in_memory = url in ("sqlite://", "sqlite:///:memory:")  # one connection, no pool
        pool = {} if in_memory else POOL_ARGUMENTS
        connect = {"check_same_thread": False, "timeout": 30}
        engine = create_engine(url, connect_args=connect, **pool)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, **POOL_ARGUMENTS)


class Database:
    """One engine and its session factory."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session committed on success, rolled back on error."""
        with self.sessions() as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    def dispose(self) -> None:
        self.engine.dispose()
