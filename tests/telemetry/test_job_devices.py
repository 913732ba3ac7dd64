"""A job's devices over its whole life (the job page's device charts): every attempt's span."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from fastapi.testclient import TestClient
from sqlalchemy import insert, update

from backend.db import Database
from backend.jobs.models import Attempt, AttemptSlice
from backend.telemetry.models import DeviceSample
from tests.telemetry.helpers import ADMIN, add_attempt, user_token


def at(unix: float) -> datetime:
    return datetime.fromtimestamp(unix, UTC)


def samples(node: str, device: int, times: range, base: float) -> list[dict[str, object]]:
    """CPU-slot samples whose util is their second after base (so each is recognisable)."""
    return [
        {"node": node, "device": device, "kind": "cpu", "time": base + t, "util": float(t),
         "mem_used": 1000 + t, "mem_total": 2**34, "temperature": None, "power": None}
        for t in times
    ]  # fmt: skip


def restarted_job(db: Database, base: float) -> tuple[int, int, int]:
    """A job whose attempt 1 held node-a slot 0 for [base+100, base+200] and whose attempt 2
    has held slot 1 since base+300 (attempt 1 on one slice row, attempt 2 on two nodes)."""
    job, first = add_attempt(db, state="running")
    with db.session() as session:
        session.execute(
            update(Attempt)
            .where(Attempt.id == first)
            .values(state="failed", claimed_at=at(base + 100), finished_at=at(base + 200))
        )
        second = Attempt(
            job_id=job, number=2, node_name="node-a", devices=[1], state="running",
            master_port=2, claimed_at=at(base + 300),
        )  # fmt: skip
        session.add(second)
        session.flush()
        session.add_all(
            [
                AttemptSlice(attempt_id=second.id, node_name="node-a", node_rank=0, devices=[1]),
                AttemptSlice(attempt_id=second.id, node_name="node-b", node_rank=1, devices=[0]),
            ]
        )
        # each slot sampled all along: before, between and after the job's attempts
        rows = [
            *samples("node-a", 0, range(0, 400, 10), base),
            *samples("node-a", 1, range(0, 400, 10), base),
            *samples("node-b", 0, range(0, 400, 10), base),
        ]
        session.execute(insert(DeviceSample), rows)
        return job, first, second.id


def test_every_attempt_shows_its_own_devices_within_its_own_span(
    api: tuple[TestClient, Database],
) -> None:
    client, db = api
    base = float(int(time.time()) - 1000)  # whole seconds: a datetime keeps microseconds
    job, first, second = restarted_job(db, base)
    body = client.get(f"/api/series/devices/{job}", headers=ADMIN).json()
    assert [(a["attempt_id"], a["number"]) for a in body] == [(first, 1), (second, 2)]
    one, two = body
    assert (one["start"], one["end"]) == (base + 100, base + 200)
    assert two["start"] == base + 300 and two["end"] is None

    # attempt 1: slot 0 of node-a, from its claim to its end, nothing of another job's load
    assert [(d["node"], d["device"], d["kind"]) for d in one["devices"]] == [("node-a", 0, "cpu")]
    assert one["devices"][0]["util"] == [float(t) for t in range(100, 201, 10)]
    assert one["devices"][0]["mem_used"] == [1000 + t for t in range(100, 201, 10)]
    # attempt 2: both nodes of its gang, from its claim until now
    assert [(d["node"], d["device"]) for d in two["devices"]] == [("node-a", 1), ("node-b", 0)]
    for device in two["devices"]:
        assert device["time"] == [base + t for t in range(300, 400, 10)]

    # a budget keeps the first and last sample of each device and spaces the rest evenly
    small = client.get(f"/api/series/devices/{job}?points=3", headers=ADMIN).json()
    assert small[0]["devices"][0]["util"] == [100.0, 150.0, 200.0]


def test_an_attempt_that_never_ran_has_no_samples(api: tuple[TestClient, Database]) -> None:
    client, db = api
    job, attempt = add_attempt(db, state="queued")
    with db.session() as session:
        session.execute(insert(DeviceSample), samples("node-a", 0, range(5), time.time() - 10))
    body = client.get(f"/api/series/devices/{job}", headers=ADMIN).json()
    assert body == [{"attempt_id": attempt, "number": 1, "start": None, "end": None, "devices": []}]


def test_another_users_job_devices_are_not_found(api: tuple[TestClient, Database]) -> None:
    client, db = api
    job, _ = add_attempt(db, owner="alice")
    secret = user_token(db, "bob")
    path = f"/api/series/devices/{job}"
    assert client.get(path, headers={"Authorization": f"Bearer {secret}"}).status_code == 404
    assert client.get(path).status_code == 401
