"""A control plane whose database cannot be written says so (SQLite on a full tmpfs)."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from tests.backend.conftest import bearer
from tests.full_disk import fill, small_filesystem

SPEC = {"name": "full", "template": "mlp", "parallelism": {"devices": 1}}


@pytest.fixture
def database_disk(tmp_path: Path) -> Iterator[Path]:
    """A 32 MiB tmpfs for the SQLite database."""
    with small_filesystem(tmp_path / "dbdisk", size="32M") as disk:
        yield disk


@pytest.fixture
def sqlite_url(database_disk: Path) -> str:
    """The SQLite database on the small filesystem (overrides the session-wide fixture)."""
    return f"sqlite:///{database_disk / 'trainboard.db'}"


@pytest.fixture
def api(settings: Settings, tokens: dict[str, str]) -> Iterator[TestClient]:
    """The app in-process, returning server errors as responses (what a client would see)."""
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


def test_writes_answer_503_with_the_cause_health_is_degraded_and_both_recover(
    api: TestClient,
    tokens: dict[str, str],
    database_disk: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    alice = bearer(tokens["alice"])
    assert api.post("/api/jobs", json=SPEC, headers=alice).status_code == 201
    with sqlite3.connect(database_disk / "trainboard.db") as raw:  # the WAL holds no spare room
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    ballast = fill(database_disk)

    with caplog.at_level(logging.ERROR, logger="backend.db_health"):
        refused = [api.post("/api/jobs", json=SPEC, headers=alice) for _ in range(5)]
    assert {r.status_code for r in refused} == {503}
    assert refused[0].json() == {"detail": "the database cannot be written: disk full"}
    assert len([r for r in caplog.records if "disk full" in r.getMessage()]) == 1
    health = api.get("/api/health")
    assert (health.status_code, health.json()) == (
        200,
        {"status": "degraded", "database": "disk full"},
    )
    scraped = api.get("/metrics", headers=bearer(tokens["admin"])).text
    assert "trainboard_database_writable 0.0" in scraped.splitlines()
    listed = api.get("/api/jobs", headers=alice)  # reads keep working
    assert listed.status_code == 200 and len(listed.json()["jobs"]) == 1

    ballast.unlink()  # space returns: no restart needed
    assert api.get("/api/health").json() == {"status": "ok", "database": "ok"}
    assert api.post("/api/jobs", json=SPEC, headers=alice).status_code == 201
    scraped = api.get("/metrics", headers=bearer(tokens["admin"])).text
    assert "trainboard_database_writable 1.0" in scraped.splitlines()
