"""A start event's facts reach the attempt row and the live delta; its batch's points too."""

from __future__ import annotations

import json
from typing import Any

import redis

from backend.db import Database
from backend.jobs.models import Attempt
from backend.telemetry.ingest.consumer import Ingest
from backend.telemetry.live.feed import LIVE_STREAM
from tests.telemetry.helpers import FACTS, point, stored_steps
from tests.telemetry.test_ingest import NewAttempt, add_batch, client, ingest  # noqa: F401
from workers.contract.protocol import EVENTS_STREAM, METRICS_STREAM


def test_a_start_events_facts_are_stored_on_its_attempt_and_sent_live(
    database: Database,
    client: redis.Redis,  # noqa: F811 (the fixtures of test_ingest)
    ingest: Ingest,  # noqa: F811
    new_attempt: NewAttempt,
) -> None:
    job, attempt = new_attempt()
    started = {"attempt_id": attempt, "kind": "started", "message": "m", "step": 0, "time": 1.0}
    add_batch(client, EVENTS_STREAM, [started | {"facts": FACTS}])
    add_batch(client, METRICS_STREAM, [point(attempt, s) for s in range(3)])
    ingest.consume()
    with database.session() as session:
        assert session.get_one(Attempt, attempt).facts == FACTS
    assert stored_steps(database, attempt) == [0, 1, 2]
    topic = f"job:{job}".encode()
    rows: Any = client.xrange(LIVE_STREAM)
    live = [json.loads(f[b"d"]) for _, f in rows if f[b"t"] == topic]
    assert any(e.get("facts") == FACTS for d in live for e in d.get("events", []))
