"""An older Trainboard started on a database a newer one migrated refuses it, untouched."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from backend.migrate import NewerDatabase, upgrade


def test_a_database_past_our_newest_migration_is_refused_naming_both_and_left_as_it_was(
    tmp_path: Path,
) -> None:
    path = tmp_path / "trainboard.db"
    upgrade(f"sqlite:///{path}")
    with sqlite3.connect(path) as raw:  # as a later version's migration would leave it
        ours = raw.execute("SELECT version_num FROM alembic_version").fetchone()[0]
        raw.execute("UPDATE alembic_version SET version_num = '9001'")
        raw.execute("CREATE TABLE from_the_future (id INTEGER PRIMARY KEY)")
    before = path.read_bytes()

    with pytest.raises(NewerDatabase) as refused:
        upgrade(f"sqlite:///{path}")

    assert str(refused.value).startswith(
        f"the database is at migration 9001, newer than this Trainboard (its newest is {ours})"
    )
    assert path.read_bytes() == before
