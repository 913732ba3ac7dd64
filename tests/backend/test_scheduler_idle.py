"""The scheduler waits longer between passes only while it has nothing to do."""

from __future__ import annotations

from fastapi.testclient import TestClient

from backend.scheduler.loop import Scheduler
from tests.backend.conftest import bearer
from tests.backend.test_jobs_api import GOOD_SPEC


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
