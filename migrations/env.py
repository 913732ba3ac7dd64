"""Alembic environment: the URL comes from the caller or from Trainboard's settings."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from backend.config import get_settings
from backend.db import make_engine
from backend.models import Base

config = context.config
target_metadata = Base.metadata


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = config.get_main_option("sqlalchemy.url") or get_settings().db_url
    engine = make_engine(url)
    with engine.connect() as conn:
        sqlite = conn.dialect.name == "sqlite"
        if sqlite:
            # batch mode copies a table and drops the old one: with foreign keys on, that
            # drop would cascade (deleting every attempt of a `jobs` table being altered)
            conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
            conn.commit()  # end the autobegun transaction: the migrations' own one commits
        _configure(conn)
        with context.begin_transaction():
            context.run_migrations()
        if sqlite:
            broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            conn.exec_driver_sql("PRAGMA foreign_keys=ON")
            conn.commit()
            if broken:
                raise RuntimeError(f"migration left rows without their parents: {broken[:5]}")
    engine.dispose()


run_migrations_online()
