"""A database made by the oldest migration, full of rows, upgrades step by step and loses nothing.

Generic on purpose: every table and column is found by introspection, so a migration added
later is checked by this test without changing it. After every single step, every row of
every table that 0001 created must still hold every original column's value (floats and
bytes bit for bit); at head, every column added since must hold its documented default.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory
from sqlalchemy.engine.interfaces import ReflectedColumn

from backend.migrate import alembic_config, upgrade
from tests.backend.oldest_schema_data import METRIC_POINTS, ROWS

OLDEST = "0001"

#: original tables a migration restructured on purpose, compared by their logical content
#: (a function giving that content, in the original's terms) instead of row by row. None so
#: far: 0007/0008 changed only metric_points' constraints, index and id sequence and added
#: `mark` (so its rows are still compared one by one, bit for bit), and 0009's curve blocks
#: replace curve_rollups, a cache that 0005 (not 0001) created and that is rebuilt from the
#: metric points. A later migration that drops or reshapes a 0001 table must add it here.
RESTRUCTURED: dict[str, Callable[[sa.Connection], list[dict[str, Any]]]] = {}

#: required columns added without a server default, and the original column the migration
#: fills them from (documented in that migration)
FILLED_FROM = {("jobs", "updated_at"): "created_at"}
#: columns a migration fills with a count of another table's rows that point at the row
#: (table, column) → (the counted table, its column holding the row's id)
COUNTED_FROM = {("attempts", "log_lines"): ("log_lines", "attempt_id")}

Rows = dict[str, list[dict[str, Any]]]


def exact(value: object) -> object:
    """A value compared bit for bit: floats by their hex form (so 5e-324 and -0.0 count)."""
    if isinstance(value, float):
        return value.hex() if not math.isnan(value) else "nan"
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def read_all(engine: sa.Engine) -> Rows:
    """Every row of every table, with the types the database reports, in primary-key order."""
    metadata = sa.MetaData()
    metadata.reflect(engine)
    rows: Rows = {}
    with engine.connect() as conn:
        for name, table in metadata.tables.items():
            if name in RESTRUCTURED:
                rows[name] = RESTRUCTURED[name](conn)
                continue
            # metric_points has no primary key on PostgreSQL from 0028 on: its id orders it
            keys = list(table.primary_key.columns) or [table.c.id]
            query = sa.select(table).order_by(*keys)
            rows[name] = [dict(r._mapping) for r in conn.execute(query)]
    return rows


def populate(engine: sa.Engine) -> None:
    metadata = sa.MetaData()
    metadata.reflect(engine)
    assert set(metadata.tables) - {"alembic_version"} == set(ROWS)  # data for every table
    with engine.begin() as conn:
        for name, rows in ROWS.items():
            conn.execute(metadata.tables[name].insert(), rows)
    if engine.dialect.name == "postgresql":  # ids were given: move the sequences past them
        with engine.begin() as conn:
            for name in ROWS:
                conn.execute(
                    sa.text(
                        f"SELECT setval(pg_get_serial_sequence('{name}', 'id'),"
                        f" (SELECT max(id) FROM {name}))"
                    )
                )


def assert_kept(before: Rows, after: Rows, revision: str) -> None:
    for table, rows in before.items():
        if table == "alembic_version":
            continue
        assert table in after, f"{revision} dropped {table}: compare it in RESTRUCTURED"
        assert len(after[table]) == len(rows), f"{revision} changed the row count of {table}"
        for old, new in zip(rows, after[table], strict=True):
            lost = set(old) - set(new)
            assert not lost, f"{revision} dropped {table}.{lost}: compare it in RESTRUCTURED"
            changed = {c: (old[c], new[c]) for c in old if exact(old[c]) != exact(new[c])}
            assert not changed, f"{revision} changed {table} row {old.get('id')}: {changed}"


def server_default(conn: sa.Connection, column: ReflectedColumn) -> object:
    """What the database makes of a column's server default (as the migration declared it)."""
    query = sa.select(sa.cast(sa.literal_column(str(column["default"])), column["type"]))
    return conn.execute(query).scalar_one()


def assert_new_columns_have_defaults(engine: sa.Engine, before: Rows, after: Rows) -> None:
    checked = 0
    inspector = sa.inspect(engine)
    with engine.connect() as conn:
        for table, rows in before.items():
            if table in RESTRUCTURED or table == "alembic_version":
                continue
            columns = {c["name"]: c for c in inspector.get_columns(table)}
            for old, new in zip(rows, after[table], strict=True):
                for name in set(new) - set(old):
                    column = columns[name]
                    if (table, name) in FILLED_FROM:
                        expected = new[FILLED_FROM[table, name]]
                    elif (table, name) in COUNTED_FROM:
                        counted, key = COUNTED_FROM[table, name]
                        expected = sum(row[key] == old["id"] for row in before[counted])
                    elif column["default"] is not None:
                        expected = server_default(conn, column)
                    else:
                        assert column["nullable"], (
                            f"{table}.{name} is required and has no server default: say in "
                            "FILLED_FROM what its migration fills existing rows with"
                        )
                        expected = None
                    assert exact(new[name]) == exact(expected), (table, name, old.get("id"))
                    checked += 1
    assert checked > 0


def revisions_after_oldest(url: str) -> list[str]:
    script = ScriptDirectory.from_config(alembic_config(url))
    order = [r.revision for r in reversed(list(script.walk_revisions()))]
    return order[order.index(OLDEST) + 1 :]


@pytest.mark.parametrize("db", ["sqlite_url", "postgres_url"])
def test_every_row_of_the_oldest_schema_survives_each_migration_to_head(
    db: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(db)  # a database of its own, dropped after
    upgrade(url, OLDEST)
    engine = sa.create_engine(url)
    populate(engine)
    original = read_all(engine)
    values = [p["value"] for p in original["metric_points"]]
    inserted = sorted(METRIC_POINTS, key=lambda p: p["id"])
    assert [exact(v) for v in values] == [exact(p["value"]) for p in inserted]
    assert "5e-324" in map(repr, values)  # the subnormal made it in, not rounded to 0

    revisions = revisions_after_oldest(url)
    assert revisions[:3] == ["0002", "0003", "0004"] and len(revisions) >= 14
    for revision in revisions:
        upgrade(url, revision)
        assert_kept(original, read_all(engine), revision)

    assert_new_columns_have_defaults(engine, original, read_all(engine))
    engine.dispose()
