"""Migrations produce exactly the ORM's schema, on SQLite and PostgreSQL, and reverse cleanly."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from backend.migrate import downgrade, upgrade
from backend.models import Base


def _schema_diff(url: str) -> list[object]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(ctx, Base.metadata)
    engine.dispose()
    return list(diff)


@pytest.mark.parametrize("db", ["sqlite_url", "postgres_url"])
def test_upgrade_head_matches_orm_and_downgrade_empties(
    db: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(db)
    upgrade(url)
    assert _schema_diff(url) == []
    downgrade(url, "base")
    engine = sa.create_engine(url)
    tables = set(sa.inspect(engine).get_table_names()) - {"alembic_version"}
    engine.dispose()
    assert tables == set()
    upgrade(url)
    assert _schema_diff(url) == []
