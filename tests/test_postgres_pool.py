"""The reused PostgreSQL test databases are as new for each test (tests/postgres_pool.py)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tests.conftest import POSTGRES_BASE, _admin
from tests.postgres_pool import PostgresPool


@pytest.fixture
def pool(postgres_pool: PostgresPool) -> PostgresPool:
    """This process's pool, the one every test's `migrated_postgres_url` comes from."""
    return postgres_pool


def run(url: str, *statements: str) -> list[object]:
    """Each statement's first value (None where it returns no rows), in one transaction."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            results = [connection.execute(sa.text(statement)) for statement in statements]
            return [r.scalar() if r.returns_rows else None for r in results]
    finally:
        engine.dispose()


def databases() -> set[str]:
    engine = sa.create_engine(f"{POSTGRES_BASE}/postgres")
    with engine.connect() as connection:
        names = set(connection.execute(sa.text("SELECT datname FROM pg_database")).scalars())
    engine.dispose()
    return names


def test_a_database_given_back_is_handed_out_empty_with_restarted_ids_and_a_new_deployment(
    pool: PostgresPool,
) -> None:
    first = pool.take()
    (deployment,) = run(first, "SELECT id FROM deployment")
    run(first, "INSERT INTO users (username, role, created_at) VALUES ('alice', 'user', now())")
    left_open = sa.create_engine(first).connect()  # a test that forgot to close its connection
    left_open.execute(sa.text("SELECT 1 FROM users FOR UPDATE"))
    pool.give_back(first)

    second = pool.take()
    assert second == first and pool.made(second)  # kept, not copied again
    assert run(second, "SELECT count(*) FROM users", "SELECT count(*) FROM deployment") == [0, 1]
    assert run(second, "SELECT id FROM deployment") != [deployment]
    (user_id,) = run(
        second,
        "INSERT INTO users (username, role, created_at) VALUES ('bob', 'user', now()) RETURNING id",
    )
    assert user_id == 1
    left_open.invalidate()


@pytest.mark.parametrize(
    "change",
    [
        "ALTER SEQUENCE metric_points_id_seq INCREMENT BY 1",
        "CREATE TABLE scratch (a int)",
        "UPDATE alembic_version SET version_num = '0001'",
        "DROP TABLE sweeps CASCADE",
    ],
)
def test_a_database_whose_schema_a_test_changed_is_dropped_for_a_fresh_copy(
    pool: PostgresPool, change: str
) -> None:
    first = pool.take()
    run(first, change)
    pool.give_back(first)

    second = pool.take()
    assert second != first and pool.made(second) and not pool.made(first)
    assert first.rsplit("/", 1)[1] not in databases()
    increment, tables = run(
        second,
        "SELECT increment_by FROM pg_sequences WHERE sequencename = 'metric_points_id_seq'",
        "SELECT count(*) FROM pg_tables WHERE tablename IN ('scratch', 'sweeps')",
    )
    assert (increment, tables) == (1024, 1)


def test_closing_drops_every_database_it_made_and_the_template() -> None:
    pool = PostgresPool(POSTGRES_BASE, _admin)
    names = {pool.take().rsplit("/", 1)[1] for _ in range(2)} | {pool.template()}
    assert names <= databases()
    pool.close()
    assert not names & databases()
