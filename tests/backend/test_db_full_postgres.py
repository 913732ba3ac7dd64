"""503 and degraded health with PostgreSQL too: the database in a tablespace on a full tmpfs."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from backend.config import Settings
from tests.app_settings import api_settings
from tests.backend.conftest import bearer
from tests.conftest import POSTGRES_BASE
from tests.full_disk import fill, small_filesystem
from tests.job_users import reachable

SPEC = {"name": "full", "template": "mlp", "parallelism": {"devices": 1}}


@pytest.fixture
def small_postgres(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A fresh database whose tables live in a tablespace on a 32 MiB tmpfs: (url, tmpfs)."""
    try:  # the server's account must own the tablespace's directory
        server = os.stat("/var/lib/postgresql")
    except FileNotFoundError:
        pytest.skip("needs the PostgreSQL server on this machine (a tablespace on a tmpfs)")
    name = f"tb_full_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(f"{POSTGRES_BASE}/postgres", isolation_level="AUTOCOMMIT")
    with small_filesystem(reachable(tmp_path) / "pgdisk", size="32M") as disk:
        space = disk / "tablespace"
        space.mkdir(mode=0o700)
        shutil.chown(space, server.st_uid, server.st_gid)
        with admin.connect() as conn:
            conn.execute(sa.text(f"CREATE TABLESPACE {name} LOCATION '{space}'"))
            conn.execute(sa.text(f'CREATE DATABASE "{name}" TABLESPACE {name}'))
        try:
            yield f"{POSTGRES_BASE}/{name}", disk
        finally:
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                conn.execute(sa.text(f"DROP TABLESPACE IF EXISTS {name}"))
            admin.dispose()


@pytest.fixture
def settings(tmp_path: Path, redis_url: str, small_postgres: tuple[str, Path]) -> Settings:
    """The backend's test settings on that database."""
    url = small_postgres[0]
    return api_settings(tmp_path, database_url=url, redis_url=redis_url, scripts=True)


def test_postgres_disk_full_answers_503_health_degraded_and_both_recover(
    api: TestClient, tokens: dict[str, str], small_postgres: tuple[str, Path]
) -> None:
    alice = bearer(tokens["alice"])
    assert api.post("/api/jobs", json=SPEC, headers=alice).status_code == 201
    ballast = fill(small_postgres[1])

    refused = [api.post("/api/jobs", json=SPEC, headers=alice) for _ in range(20)]
    assert 503 in {r.status_code for r in refused}
    assert {r.status_code for r in refused} <= {201, 503}  # rows fit in pages already there
    first = next(r for r in refused if r.status_code == 503)
    assert first.json() == {"detail": "the database cannot be written: disk full"}
    assert api.get("/api/health").json() == {"status": "degraded", "database": "disk full"}
    assert api.get("/api/jobs", headers=alice).status_code == 200

    ballast.unlink()
    assert api.get("/api/health").json() == {"status": "ok", "database": "ok"}
    assert api.post("/api/jobs", json=SPEC, headers=alice).status_code == 201
