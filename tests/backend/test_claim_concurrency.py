"""No job starts twice: many claims of one attempt at the same moment on PostgreSQL, one wins."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text

from backend.config import Settings
from backend.db import Database
from backend.jobs.attempts import claim
from backend.jobs.models import Attempt, AttemptSlice, Job, JobEvent
from backend.scheduler.loop import Scheduler
from tests.app_settings import api_settings
from tests.backend.conftest import bearer, node_pool_scheduler
from tests.backend.test_jobs_api import GOOD_SPEC, queued_orders
from workers.contract.protocol import NodeDevice, NodeRegistration

#: claimants of one attempt at once: a Celery message delivered that many times
CLAIMANTS = 8
#: jobs raced one after another, so that one lucky interleaving cannot pass the test
ROUNDS = 5
#: the worker process's id, as its agent registers it (the claim's fencing token)
INSTANCE = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def settings(tmp_path: Path, migrated_postgres_url: str, redis_url: str) -> Settings:
    """The API on an empty PostgreSQL database (row locks, READ COMMITTED), no scheduler loop."""
    return api_settings(tmp_path, database_url=migrated_postgres_url, redis_url=redis_url)


def scheduled_attempt(api: TestClient, tokens: dict[str, str], scheduler: Scheduler) -> int:
    """Submit a job and let the real scheduler place it on n1; the attempt's id."""
    job = api.post("/api/jobs", json=GOOD_SPEC, headers=bearer(tokens["alice"]))
    assert job.status_code == 201, job.text
    scheduler.tick()
    order = queued_orders(api.app.state.redis, "n1")[-1]  # type: ignore[attr-defined]
    assert order["job_id"] == job.json()["id"]
    return int(order["attempt_id"])


def race(database: Database, attempt_id: int) -> list[bool]:
    """CLAIMANTS sessions, each connected first, call claim() for n1 at one barrier."""
    barrier = threading.Barrier(CLAIMANTS)

    def claimant() -> bool:
        with database.session() as session:
            session.execute(text("SELECT 1"))  # the connection is open before the start
            barrier.wait(timeout=30)
            return claim(session, attempt_id=attempt_id, node="n1", instance=INSTANCE)

    with ThreadPoolExecutor(CLAIMANTS) as pool:
        return list(pool.map(lambda _: claimant(), range(CLAIMANTS)))


def test_exactly_one_of_many_simultaneous_claims_of_an_attempt_wins(
    api: TestClient, tokens: dict[str, str], settings: Settings, database: Database
) -> None:
    registration = NodeRegistration(
        name="n1",
        instance=INSTANCE,
        hostname="h",
        address="127.0.0.1",
        devices=[NodeDevice(index=i, kind="cpu", name=f"slot {i}") for i in range(2 * ROUNDS)],
        data_dir="/",
    )
    registered = api.post(
        "/api/nodes/register", json=registration.model_dump(), headers=bearer(tokens["node"])
    )
    assert registered.status_code == 200, registered.text
    assert database.engine.dialect.name == "postgresql"
    scheduler = node_pool_scheduler(database, api.app.state.redis, settings.redis_url)
    for _ in range(ROUNDS):
        attempt_id = scheduled_attempt(api, tokens, scheduler)
        results = race(database, attempt_id)
        assert sorted(results) == [False] * (CLAIMANTS - 1) + [True], results
        with database.session() as session:
            attempt = session.get_one(Attempt, attempt_id)
            job = session.get_one(Job, attempt.job_id)
            slices = session.scalars(
                select(AttemptSlice.state).where(AttemptSlice.attempt_id == attempt_id)
            ).all()
            started = session.scalars(
                select(JobEvent.kind).where(
                    JobEvent.attempt_id == attempt_id, JobEvent.kind == "running"
                )
            ).all()
            assert (attempt.state, job.state, list(slices)) == ("running", "running", ["running"])
            assert started == ["running"]  # the job's timeline says it started once
        # a claim that comes after the race (a late redelivery) loses too
        with database.session() as session:
            assert claim(session, attempt_id=attempt_id, node="n1", instance=INSTANCE) is False
