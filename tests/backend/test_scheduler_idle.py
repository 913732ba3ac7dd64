"""The scheduler waits longer between passes only while it has nothing to do, and skips
the database while nothing woke it and nothing can have come due."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, select

from backend.config import Settings
from backend.db import Database, utcnow
from backend.executors.nodes import NodePool
from backend.jobs.models import Attempt
from backend.nodes.models import Node, NodeState
from backend.scheduler.loop import Scheduler
from backend.signals import wake_scheduler
from tests.backend.conftest import bearer
from tests.backend.test_jobs_api import GOOD_SPEC
from tests.backend.test_usage_api import ended_attempt
from tests.stack import wait_for
from workers.node.celery_app import make_celery


def test_passes_slow_down_only_while_nothing_is_queued_or_in_flight(
    api: TestClient, tokens: dict[str, str], node_n1: str, scheduler: Scheduler
) -> None:
    alice = bearer(tokens["alice"])
    assert scheduler.idle_interval > scheduler.interval
    scheduler.tick()
    assert scheduler.wait_seconds == scheduler.idle_interval  # an empty cluster: idle

    job = api.post("/api/jobs", json=GOOD_SPEC, headers=alice).json()
    scheduler.tick()  # places it
    assert api.get(f"/api/jobs/{job['id']}", headers=alice).json()["state"] == "scheduled"
    assert scheduler.wait_seconds == scheduler.interval
    scheduler.tick()  # nothing changed, but the job is in flight (its claim is awaited)
    assert scheduler.wait_seconds == scheduler.interval

    assert api.post(f"/api/jobs/{job['id']}/cancel", headers=alice).is_success
    assert api.get(f"/api/jobs/{job['id']}", headers=alice).json()["state"] == "cancelled"
    scheduler.tick()  # no claim came: it ended at once, and nothing is left to do
    assert scheduler.wait_seconds == scheduler.idle_interval


def test_a_queued_job_that_cannot_be_placed_keeps_the_passes_short(
    api: TestClient, tokens: dict[str, str], scheduler: Scheduler
) -> None:
    alice = bearer(tokens["alice"])
    job = api.post("/api/jobs", json=GOOD_SPEC, headers=alice).json()  # no node: it waits
    scheduler.tick()
    scheduler.tick()
    assert api.get(f"/api/jobs/{job['id']}", headers=alice).json()["state"] == "queued"
    assert scheduler.wait_seconds == scheduler.interval

    assert api.post(f"/api/jobs/{job['id']}/cancel", headers=alice).is_success
    scheduler.tick()
    assert scheduler.wait_seconds == scheduler.idle_interval


def quick_scheduler(
    settings: Settings, database: Database, api: TestClient, *, lease: float
) -> Scheduler:
    """The node-pool scheduler of the `api` app with a `lease`-second heartbeat timeout,
    whose idle loop waits 0.1 s for a wake-up (so a test can run many of its turns)."""
    executor = NodePool(
        client=api.app.state.redis,
        celery=make_celery(settings.redis_url),
        heartbeat_timeout=lease,
    )
    return Scheduler(
        db=database,
        client=api.app.state.redis,
        interval=0.1,
        idle_interval=0.1,
        executor=executor,
    )


@pytest.fixture
def statements(database: Database) -> Iterator[list[str]]:
    """Every SQL statement the database runs from now on."""
    seen: list[str] = []

    def record(*args: Any) -> None:
        seen.append(args[2])

    event.listen(database.engine, "before_cursor_execute", record)
    yield seen
    event.remove(database.engine, "before_cursor_execute", record)


def test_an_idle_leader_asks_the_database_nothing_until_woken(
    api: TestClient,
    tokens: dict[str, str],
    node_n1: str,
    settings: Settings,
    database: Database,
    statements: list[str],
) -> None:
    scheduler = quick_scheduler(settings, database, api, lease=60)
    scheduler._pass_or_wait()  # its first turn as leader: a pass
    scheduler._pass_or_wait()  # and the one n1's registration woke
    assert statements
    statements.clear()
    for _ in range(5):
        scheduler._pass_or_wait()
    assert statements == []  # nothing queued, nothing woke it, no lease near its end

    alice = bearer(tokens["alice"])
    job = api.post("/api/jobs", json=GOOD_SPEC, headers=alice).json()  # wakes it
    scheduler._pass_or_wait()  # the turn that was waiting hears the wake-up
    scheduler._pass_or_wait()
    assert api.get(f"/api/jobs/{job['id']}", headers=alice).json()["state"] == "scheduled"


def test_a_silent_node_is_lost_while_the_passes_are_skipped(
    api: TestClient, node_n1: str, settings: Settings, database: Database
) -> None:
    scheduler = quick_scheduler(settings, database, api, lease=1)

    def lost() -> bool:
        scheduler._pass_or_wait()
        with database.session() as session:
            node = session.scalars(select(Node).where(Node.name == node_n1)).one()
            return node.state == NodeState.lost

    # its lease ends a second after it registered (or after the first pass): a skipped
    # pass neither misses that moment nor counts the gaps between passes as its own stall
    wait_for(lost, timeout=20, what="node n1 to be lost", interval=0)


def test_an_ended_attempt_is_settled_while_the_passes_are_skipped(
    api: TestClient, tokens: dict[str, str], settings: Settings, database: Database
) -> None:
    scheduler = quick_scheduler(settings, database, api, lease=60)
    scheduler._pass_or_wait()
    now = utcnow()
    with database.session() as session:  # alice's job ran a minute and ended now
        attempt = ended_attempt(
            session, "alice", node="n1", devices=[0], start=now - timedelta(minutes=1), end=now
        )
        session.commit()
    wake_scheduler(api.app.state.redis)  # as its finish report does

    def settled() -> bool:
        scheduler._pass_or_wait()
        with database.session() as session:
            return session.get_one(Attempt, attempt.id).allocated_device_seconds is not None

    # the woken pass finds it too fresh to settle; settled SETTLE_AFTER (10 s) after its
    # end, not at the 30-s bound on skipped passes
    wait_for(settled, timeout=25, what="the ended attempt to be settled", interval=0)


def test_a_standby_leaves_the_wake_up_to_the_leader(
    api: TestClient,
    tokens: dict[str, str],
    node_n1: str,
    settings: Settings,
    database: Database,
) -> None:
    # two API processes of one deployment: one leads, the other stands by
    leader = quick_scheduler(settings, database, api, lease=60)
    standby = quick_scheduler(settings, database, api, lease=60)
    leader._pass_or_wait()  # leads: a pass
    leader._pass_or_wait()  # and the one n1's registration woke; idle since
    alice = bearer(tokens["alice"])
    job = api.post("/api/jobs", json=GOOD_SPEC, headers=alice).json()  # wakes "the scheduler"
    standby._pass_or_wait()  # not the leader: a wake-up it took would be lost to the leader
    leader._pass_or_wait()  # the turn that was waiting hears it
    leader._pass_or_wait()
    assert api.get(f"/api/jobs/{job['id']}", headers=alice).json()["state"] == "scheduled"
