"""Migrations produce exactly the ORM's schema, on SQLite and PostgreSQL, and reverse cleanly."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from backend.migrate import downgrade, upgrade
from backend.models import Base


@pytest.fixture(params=["sqlite_url", "postgres_url"])
def url(request: pytest.FixtureRequest) -> str:
    """An empty database, SQLite and then PostgreSQL."""
    return str(request.getfixturevalue(request.param))


def _schema_diff(url: str) -> list[object]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(ctx, Base.metadata)
    engine.dispose()
    return list(diff)


def test_upgrade_head_matches_orm_and_downgrade_empties(url: str) -> None:
    upgrade(url)
    assert _schema_diff(url) == []
    downgrade(url, "base")
    engine = sa.create_engine(url)
    tables = set(sa.inspect(engine).get_table_names()) - {"alembic_version"}
    engine.dispose()
    assert tables == set()
    upgrade(url)
    assert _schema_diff(url) == []


CREATED = "2026-01-02 03:04:05+00:00"


def _old_rows(url: str, revision: str, *, role: str, insert: str) -> sa.Engine:
    """An engine on the database at url, migrated to revision, holding user 1 (of role) and
    the row of `insert` (its :t is CREATED)."""
    upgrade(url, revision)
    engine = sa.create_engine(url)
    user = "INSERT INTO users (id, username, role, created_at) VALUES (1, 'u', :r, :t)"
    with engine.begin() as conn:
        conn.execute(sa.text(user), {"r": role, "t": CREATED})
        conn.execute(sa.text(insert), {"t": CREATED})
    return engine


def test_job_updated_at_is_filled_for_jobs_that_existed_before(url: str) -> None:
    job = (
        "INSERT INTO jobs (id, name, owner_id, state, spec, priority_rank,"
        " devices_requested, attempt, restarts, step, created_at)"
        " VALUES (1, 'old', 1, 'queued', '{}', 1, 1, 0, 0, 0, :t)"
    )
    engine = _old_rows(url, "0003", role="user", insert=job)
    upgrade(url)
    with engine.connect() as conn:
        created, updated = conn.execute(sa.text("SELECT created_at, updated_at FROM jobs")).one()
    engine.dispose()
    assert updated == created


def test_metric_point_ids_come_in_blocks_of_1024_after_0008(postgres_url: str) -> None:
    def increment() -> int:
        engine = sa.create_engine(postgres_url)
        with engine.connect() as conn:
            query = "SELECT increment_by FROM pg_sequences WHERE sequencename = :s"
            value = conn.execute(sa.text(query), {"s": "metric_points_id_seq"}).scalar_one()
        engine.dispose()
        return int(value)

    upgrade(postgres_url, "0007")
    assert increment() == 1
    upgrade(postgres_url, "0008")
    assert increment() == 1024
    downgrade(postgres_url, "0007")
    assert increment() == 1


def test_node_tokens_from_before_0010_name_no_node_and_survive_a_downgrade(url: str) -> None:
    token = (
        "INSERT INTO api_tokens (id, user_id, token_hash, prefix, kind, name, scopes,"
        " created_at) VALUES (1, 1, 'h', 'tb_x', 'api', 'gpu-0', 'node', :t)"
    )
    engine = _old_rows(url, "0009", role="admin", insert=token)
    upgrade(url, "0010")
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT node_name FROM api_tokens")).scalar_one() is None
    downgrade(url, "0009")
    columns = {c["name"] for c in sa.inspect(engine).get_columns("api_tokens")}
    nodes = {c["name"] for c in sa.inspect(engine).get_columns("nodes")}
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT name FROM api_tokens")).scalar_one() == "gpu-0"
    engine.dispose()
    assert "node_name" not in columns and "data_dir" not in nodes


def test_log_lines_stored_before_0022_are_counted_and_survive_a_downgrade(url: str) -> None:
    job = (
        "INSERT INTO jobs (id, name, owner_id, state, spec, priority_rank, devices_requested,"
        " attempt, restarts, step, created_at, updated_at)"
        " VALUES (1, 'old', 1, 'running', '{}', 1, 1, 1, 0, 0, :t, :t)"
    )
    engine = _old_rows(url, "0021", role="user", insert=job)
    with engine.begin() as conn:
        for attempt in (1, 2):
            conn.execute(
                sa.text(
                    "INSERT INTO attempts (id, job_id, number, node_name, devices, state,"
                    " master_port, created_at) VALUES (:a, 1, :a, 'n', '[0]', 'running', 1, :t)"
                ),
                {"a": attempt, "t": CREATED},
            )
        conn.execute(
            sa.text(
                "INSERT INTO log_lines (attempt_id, rank, stream, seq, line, time)"
                " VALUES (1, 0, 'stdout', :s, 'x', 0)"
            ),
            [{"s": s} for s in range(3)],
        )
    upgrade(url, "0022")
    counts = "SELECT id, log_lines, log_lines_dropped FROM attempts ORDER BY id"
    with engine.connect() as conn:
        assert [tuple(r) for r in conn.execute(sa.text(counts))] == [(1, 3, 0), (2, 0, 0)]
    downgrade(url, "0021")
    columns = {c["name"] for c in sa.inspect(engine).get_columns("attempts")}
    indexes = {i["name"] for i in sa.inspect(engine).get_indexes("log_lines")}
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM log_lines")).scalar_one() == 3
    engine.dispose()
    assert not {"log_lines", "log_lines_dropped"} & columns
    assert "ix_log_lines_attempt_id_id" not in indexes


def test_metric_points_lose_the_id_key_on_postgres_at_0028_and_get_it_back(url: str) -> None:
    point = (
        "INSERT INTO metric_points (attempt_id, rank, step, name, value, time)"
        " VALUES (1, 0, :s, 'loss', 1.0, 0)"
    )
    upgrade(url, "0027")
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(point), [{"s": 1}, {"s": 2}])
    upgrade(url, "0028")
    postgres = engine.dialect.name == "postgresql"
    key = sa.inspect(engine).get_pk_constraint("metric_points")["constrained_columns"]
    indexes = {i["name"] for i in sa.inspect(engine).get_indexes("metric_points")}
    # SQLite's INTEGER PRIMARY KEY is its rowid, kept
    assert key == ([] if postgres else ["id"])
    assert "ix_metric_points_mark_ids" in indexes
    with engine.begin() as conn:  # the idempotency key still refuses a second row
        conn.execute(sa.text(point), {"s": 3})
        with pytest.raises(sa.exc.IntegrityError), conn.begin_nested():
            conn.execute(sa.text(point), {"s": 3})
        ids = conn.execute(sa.text("SELECT id FROM metric_points ORDER BY step")).scalars().all()
    assert len(set(ids)) == 3 and ids == sorted(ids)
    downgrade(url, "0027")
    key = sa.inspect(engine).get_pk_constraint("metric_points")["constrained_columns"]
    indexes = {i["name"] for i in sa.inspect(engine).get_indexes("metric_points")}
    engine.dispose()
    assert key == ["id"] and "ix_metric_points_mark_ids" not in indexes
