"""A slice's claim clock starts when its pass commits, not when its attempt row is written.

A pass over a long queue on a loaded machine can run longer than the claim timeout
between writing its attempts and committing them (#34: 147 s against 60 s). Counted from
the write, the next pass withdrew every placement of the previous one as unclaimed, though
nodes had seen them for under a second; with such a queue every pass undid the last.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, select, update

from backend.db import Database, as_utc, utcnow
from backend.executors.nodes import NodePool
from backend.jobs.models import Attempt, Job, JobEvent
from backend.scheduler.loop import Scheduler
from tests.backend.conftest import bearer
from tests.backend.test_claim_gang import settings  # noqa: F401 (on SQLite and PostgreSQL)
from tests.backend.test_jobs_api import GOOD_SPEC


@pytest.fixture
def rows_written_long_before_the_commit(scheduler: Scheduler) -> Iterator[None]:
    """Every attempt row is written as if two claim timeouts before its pass commits: the
    pass's long tail (the rest of a 100k queue's dispatch, a loaded machine) made explicit."""
    assert isinstance(scheduler.executor, NodePool)
    long_ago = 2 * scheduler.executor.claim_timeout

    def written_early(_mapper: Any, _connection: Any, attempt: Attempt) -> None:
        attempt.created_at = utcnow() - long_ago

    event.listen(Attempt, "before_insert", written_early)
    try:
        yield
    finally:
        event.remove(Attempt, "before_insert", written_early)


def attempts_of(database: Database, job_id: int) -> list[tuple[str, datetime]]:
    with database.session() as session:
        rows = session.execute(
            select(Attempt.state, Attempt.created_at)
            .where(Attempt.job_id == job_id)
            .order_by(Attempt.number)
        ).all()
        return [(state, as_utc(created)) for state, created in rows]


def test_a_pass_longer_than_the_claim_timeout_does_not_withdraw_its_own_placements(
    api: TestClient,
    tokens: dict[str, str],
    node_n1: str,
    scheduler: Scheduler,
    database: Database,
    rows_written_long_before_the_commit: None,
) -> None:
    assert isinstance(scheduler.executor, NodePool)
    timeout = scheduler.executor.claim_timeout
    job = api.post("/api/jobs", json=GOOD_SPEC, headers=bearer(tokens["alice"])).json()

    scheduler.tick()  # places it: the row written two claim timeouts before the commit
    [(state, visible_from)] = attempts_of(database, job["id"])
    assert state == "scheduled"

    scheduler.tick()  # the next pass, right after: no node has had the time to claim
    assert attempts_of(database, job["id"]) == [("scheduled", visible_from)]

    # the clock runs out one claim timeout after the commit: the next pass withdraws it
    with database.session() as session:
        session.execute(
            update(Attempt)
            .where(Attempt.job_id == job["id"])
            .values(created_at=visible_from - timeout - timedelta(seconds=1))
        )
    scheduler.tick()
    states = [state for state, _ in attempts_of(database, job["id"])]
    assert states[0] == "withdrawn"
    with database.session() as session:
        messages = session.scalars(
            select(JobEvent.message).where(JobEvent.job_id == job["id"])
        ).all()
        assert any("did not claim" in m for m in messages), messages
        assert session.get_one(Job, job["id"]).unclaimed == 1
