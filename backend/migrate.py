"""Run Alembic migrations from code (used at start in embedded mode and by tests)."""

from __future__ import annotations

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
    config = alembic_config(url)
    refuse_newer(config, url)
    command.upgrade(config, revision)


def refuse_newer(config: Config, url: str) -> None:
    """Raise NewerDatabase, naming both versions, if the database is past our newest migration."""
    script = ScriptDirectory.from_config(config)
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            current = MigrationContext.configure(connection).get_current_heads()
    finally:
        engine.dispose()
    known = {revision.revision for revision in script.walk_revisions()}
    unknown = [revision for revision in current if revision not in known]
    if unknown:
        raise NewerDatabase(
            f"the database is at migration {unknown[0]}, newer than this Trainboard "
            f"(its newest is {script.get_current_head()}): run the newer version, or downgrade "
            "the database with it first (docs/operations.md); nothing was changed"
        )


def downgrade(url: str, revision: str = "base") -> None:
    """Take the database at url down to revision."""
    command.downgrade(alembic_config(url), revision)
