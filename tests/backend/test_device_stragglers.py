"""Repeated stragglers on one device show on the cluster API, counted over the newest 24 h."""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient

from backend.db import Database, utcnow
from backend.health.stragglers import KIND, Straggler
from backend.jobs.models import JobEvent
from tests.backend.conftest import bearer, job_row


def _straggler(
    database: Database, job_id: int, *, node: str, device: int | None, hours_ago: float = 0
) -> None:
    """A straggler event worded exactly as the detector words it."""
    message = Straggler(0, 1, node, device, median=0.060, others=0.010).message
    with database.session() as session:
        session.add(
            JobEvent(
                job_id=job_id,
                kind=KIND,
                message=message,
                time=utcnow() - timedelta(hours=hours_ago),
            )
        )


def test_a_device_counts_its_straggler_events_of_the_last_day_and_names_their_jobs(
    api: TestClient, tokens: dict[str, str], database: Database, node_headers: dict[str, str]
) -> None:
    alice = bearer(tokens["alice"])
    first, second, old = (job_row(database) for _ in range(3))
    _straggler(database, first, node="n1", device=0, hours_ago=5)
    _straggler(database, second, node="n1", device=0, hours_ago=1)
    _straggler(database, second, node="n1", device=0)
    _straggler(database, old, node="n1", device=0, hours_ago=30)  # outside the window
    _straggler(database, old, node="n2", device=0)  # another node's device 0
    _straggler(database, old, node="n1", device=None)  # a rank whose device is unknown

    answer = api.get("/api/nodes", headers=alice)
    assert answer.status_code == 200, answer.text
    (node,) = [n for n in answer.json()["nodes"] if n["name"] == "n1"]
    (device,) = node["devices"]
    assert device["stragglers"] == {"count": 3, "hours": 24, "jobs": [first, second]}


def test_a_device_without_stragglers_has_none(
    api: TestClient, tokens: dict[str, str], database: Database, node_headers: dict[str, str]
) -> None:
    job = job_row(database)
    _straggler(database, job, node="n1", device=3)  # a device n1 does not have
    nodes = api.get("/api/nodes", headers=bearer(tokens["alice"])).json()["nodes"]
    assert [d["stragglers"] for n in nodes for d in n["devices"]] == [None]
