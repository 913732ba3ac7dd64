"""Fixtures for telemetry tests: either database, jobs with attempts, a live API."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from backend.app import create_app
from backend.auth.service import bootstrap_admin_token, ensure_admin
from backend.config import Settings
from backend.db import Database
from tests.app_settings import ADMIN_TOKEN, api_settings
from tests.conftest import REDIS_BASE, TELEMETRY_REDIS_DB, emptied
from tests.telemetry.helpers import LiveServer, add_attempt


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A real Redis database of its own (not the suite's), empty at the start.

    The ingest and the live stream use fixed stream names; a database of their own keeps
    these tests apart from API tests whose in-process ingest would consume their entries.
    """
    yield from emptied(f"{REDIS_BASE}/{TELEMETRY_REDIS_DB}")


@pytest.fixture(params=["sqlite_url", "migrated_postgres_url"], ids=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, migrate: Callable[[str], None]) -> str:
    """A migrated, empty database: SQLite file or PostgreSQL."""
    return migrated(request, migrate)


def migrated(request: pytest.FixtureRequest, migrate: Callable[[str], None]) -> str:
    """The database that request.param names (a fixture), migrated: a `db_url` fixture's body."""
    url: str = request.getfixturevalue(request.param)
    migrate(url)
    return url


@pytest.fixture
def database(db_url: str) -> Iterator[Database]:
    db = Database(db_url)
    yield db
    db.dispose()


@pytest.fixture
def new_attempt(database: Database) -> Callable[..., tuple[int, int]]:
    """Make a running job with one attempt: returns (job id, attempt id)."""
    return lambda **kw: add_attempt(database, **kw)


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str, redis_url: str) -> Settings:
    """An API on SQLite and the test Redis, with ingest and without the scheduler."""
    return api_settings(tmp_path, database_url=sqlite_url, redis_url=redis_url)


@pytest.fixture
def live_api(settings: Settings) -> Iterator[LiveServer]:
    """The real app served by uvicorn on a free port (its lifespan runs ingest and the hub)."""
    with LiveServer.running(settings) as server:
        yield server


@pytest.fixture
def api(
    settings: Settings, migrate: Callable[[str], None]
) -> Iterator[tuple[TestClient, Database]]:
    """The app in-process on a migrated database with the admin token; and that database."""
    migrate(settings.db_url)
    db = Database(settings.db_url)
    with db.session() as session:
        bootstrap_admin_token(session, configured=ADMIN_TOKEN)
        ensure_admin(session)
    with TestClient(create_app(settings.model_copy(update={"run_ingest": False}))) as client:
        yield client, db
    db.dispose()
