"""Fixtures for API tests: a real app on SQLite or PostgreSQL and real Redis, with tokens."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import select
from starlette.websockets import WebSocketDisconnect

from backend.app import create_app
from backend.auth.models import User
from backend.auth.service import (
    bootstrap_admin_token,
    bootstrap_node_token,
    ensure_admin,
    issue_token,
)
from backend.config import Settings
from backend.db import Database
from backend.executors.nodes import NodePool
from backend.jobs.models import Job
from backend.scheduler.loop import Scheduler
from tests.app_settings import ADMIN_TOKEN, api_settings
from tests.workers.worker_helpers import PrivateRedis
from workers.contract.protocol import NodeDevice, NodeRegistration
from workers.node.celery_app import make_celery

#: the worker instance id of the node `node_headers` registers
NODE_INSTANCE = "0" * 32


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str, redis_url: str) -> Settings:
    return api_settings(tmp_path, database_url=sqlite_url, redis_url=redis_url, scripts=True)


@pytest.fixture
def database(settings: Settings, migrate: Callable[[str], None]) -> Iterator[Database]:
    migrate(settings.db_url)
    db = Database(settings.db_url)
    yield db
    db.dispose()


@pytest.fixture
def tokens(database: Database) -> dict[str, str]:
    """Secrets for an admin, a plain user, and a node agent."""
    return issue_tokens(database)


def issue_tokens(database: Database) -> dict[str, str]:
    """An admin's, alice's (read, submit) and node n1's secrets, their rows added."""
    with database.session() as session:
        admin = bootstrap_admin_token(session, configured=ADMIN_TOKEN)
        node = bootstrap_node_token(session, node="n1")
        ensure_admin(session)
        user = User(username="alice", role="user")
        session.add(user)
        session.flush()
        _, alice = issue_token(session, user=user, scopes="read,submit")
    return {"admin": admin, "node": node, "alice": alice}


@pytest.fixture
def api(settings: Settings, tokens: dict[str, str]) -> Iterator[TestClient]:
    """The app in-process (its lifespan runs), without credentials."""
    with TestClient(create_app(settings)) as client:
        yield client


@dataclass(frozen=True)
class SharedApi:
    """One app for a whole test module, and its tokens (see `module_api`)."""

    client: TestClient
    tokens: dict[str, str]
    settings: Settings


@contextlib.contextmanager
def module_settings(
    tmp_path_factory: pytest.TempPathFactory, migrate: Callable[[str], None]
) -> Iterator[tuple[Settings, dict[str, str]]]:
    """Settings for an app that a whole test module shares (SQLite, a Redis server of its own,
    no submission limit), and its tokens."""
    tmp = tmp_path_factory.mktemp("module-api")
    url = f"sqlite:///{tmp / 'trainboard.db'}"
    migrate(url)
    database = Database(url)
    tokens = issue_tokens(database)
    database.dispose()
    server = PrivateRedis(tmp)  # apart from the suite's: a test's redis_url flushes that one
    server.start()
    try:
        yield (
            api_settings(
                tmp, database_url=url, redis_url=server.url, scripts=True, submit_rate_limit=10**4
            ),
            tokens,
        )
    finally:
        server.stop()


@pytest.fixture(scope="module")
def module_api(
    tmp_path_factory: pytest.TempPathFactory, migrate: Callable[[str], None]
) -> Iterator[SharedApi]:
    """One app for a module whose tests each send requests that are refused or add rows no
    other test of it reads: an app of its own costs a test ~0.1 s, most of what such a test
    takes."""
    with (
        module_settings(tmp_path_factory, migrate) as (settings, tokens),
        TestClient(create_app(settings)) as client,
    ):
        yield SharedApi(client, tokens, settings)


def job_count(api: TestClient, token: str) -> int:
    """How many jobs the token's user sees (for 'nothing was stored' on a shared app)."""
    jobs = api.get("/api/jobs", params={"limit": 1000}, headers=bearer(token)).json()["jobs"]
    return len(jobs)


def node_pool_scheduler(database: Database, client: redis.Redis, redis_url: str) -> Scheduler:
    """A scheduler whose executor is the node pool (Celery over `redis_url`), as `up` builds
    it, with a 60-s heartbeat timeout and 0.1-s passes; call its `tick()` for one pass."""
    executor = NodePool(client=client, celery=make_celery(redis_url), heartbeat_timeout=60)
    return Scheduler(db=database, client=client, interval=0.1, executor=executor)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def node_headers(api: TestClient, tokens: dict[str, str]) -> dict[str, str]:
    """The node token's headers, node n1 (one CPU slot) registered as instance NODE_INSTANCE."""
    registration = NodeRegistration(
        name="n1",
        hostname="h",
        address="127.0.0.1",
        devices=[NodeDevice(index=0, kind="cpu", name="CPU slot 0")],
        instance=NODE_INSTANCE,
    )
    headers = bearer(tokens["node"])
    answer = api.post("/api/nodes/register", json=registration.model_dump(), headers=headers)
    assert answer.is_success
    return headers


def ws_refusal(api: TestClient, headers: dict[str, str] | None = None) -> int:
    """The close code of a websocket to /api/ws that the server refuses (fails if it is not)."""
    with (
        api.websocket_connect("/api/ws", headers=headers or {}) as ws,
        pytest.raises(WebSocketDisconnect) as refused,
    ):
        ws.receive_text()
    return refused.value.code


def job_row(database: Database, *, owner: str = "alice", name: str = "j", devices: int = 1) -> int:
    """A job of `owner`'s as a bare row, for tests about what is stored against it."""
    with database.session() as session:
        user = session.scalars(select(User).where(User.username == owner)).one()
        job = Job(name=name, owner_id=user.id, spec={}, devices_requested=devices)
        session.add(job)
        session.flush()
        return job.id


@pytest.fixture
def node_n1(api: TestClient, tokens: dict[str, str]) -> str:
    """Node n1 registered with four CPU slots (its data dir /: checkpoints under /runs)."""
    registration = NodeRegistration(
        name="n1",
        hostname="h",
        address="127.0.0.1",
        devices=[NodeDevice(index=i, kind="cpu", name=f"CPU slot {i}") for i in range(4)],
        data_dir="/",  # its checkpoints lie in /runs/job-<id>/checkpoints
    )
    response = api.post(
        "/api/nodes/register", json=registration.model_dump(), headers=bearer(tokens["node"])
    )
    assert response.status_code == 200
    return "n1"


@pytest.fixture
def scheduler(api: TestClient, settings: Settings, database: Database) -> Scheduler:
    """The node-pool scheduler of the `api` app; `tick()` runs one pass."""
    return node_pool_scheduler(database, api.app.state.redis, settings.redis_url)
