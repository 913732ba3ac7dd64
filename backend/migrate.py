"""Run Alembic migrations from code (used at start in embedded mode and by tests)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine

ROOT = Path(__file__).resolve().parent.parent


def alembic_config(url: str) -> Config:
    """An Alembic config pointing at the project's migrations and the given database."""
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(ROOT / "migrations"))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


class NewerDatabase(RuntimeError):
    """The database was migrated by a newer Trainboard than this one: it is left untouched."""


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at url up to revision (refusing one this version does not know)."""
    current = current_heads(url)
    refuse_newer(current)
    if revision == "head" and current == {known_revisions().head}:
        return  # what Alembic would find too, without loading every migration file again
    command.upgrade(alembic_config(url), revision)


@dataclass(frozen=True)
class Revisions:
    """The migrations this version ships: every revision id, and the newest."""

    ids: frozenset[str]
    head: str


@functools.cache
def known_revisions() -> Revisions:
    """Read once a process: Alembic executes every migration file to list them (~10 ms each)."""
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    head = script.get_current_head()
    assert head is not None, "the project ships at least one migration"
    return Revisions(frozenset(r.revision for r in script.walk_revisions()), head)


def current_heads(url: str) -> set[str]:
    """The revisions the database at url is at (none for an empty database)."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return set(MigrationContext.configure(connection).get_current_heads())
    finally:
        engine.dispose()


def refuse_newer(current: set[str]) -> None:
    """Raise NewerDatabase, naming both versions, if the database is past our newest migration."""
    known = known_revisions()
    unknown = sorted(current - known.ids)
    if unknown:
        raise NewerDatabase(
            f"the database is at migration {unknown[0]}, newer than this Trainboard "
            f"(its newest is {known.head}): run the newer version, or downgrade "
            "the database with it first (docs/operations.md); nothing was changed"
        )


def downgrade(url: str, revision: str = "base") -> None:
    """Take the database at url down to revision."""
    command.downgrade(alembic_config(url), revision)
