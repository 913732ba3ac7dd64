"""Stored log lines are capped per attempt: the newest `cap` are kept, the oldest deleted and
counted, on SQLite and PostgreSQL; the logs API says how many were dropped and the cap."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from sqlalchemy import select

from backend.db import Database
from backend.jobs.models import Attempt
from backend.telemetry.ingest.consumer import Ingest
from backend.telemetry.ingest.writer import write_batch
from backend.telemetry.models import LogLine
from workers.contract.protocol import (
    BATCH_FIELD,
    DEVICES_STREAM,
    EVENTS_STREAM,
    LOGS_STREAM,
    METRICS_STREAM,
)

NewAttempt = Callable[..., tuple[int, int]]
CAP = 100


def lines(attempt_id: int, seqs: range, *, rank: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "attempt_id": attempt_id,
            "rank": rank,
            "stream": "stdout",
            "seq": s,
            "line": f"line {s}",
            "time": 1.0 + s,
        }
        for s in seqs
    ]


def write(database: Database, logs: list[dict[str, Any]], cap: int = CAP) -> None:
    items: dict[str, Any] = {METRICS_STREAM: [], DEVICES_STREAM: [], EVENTS_STREAM: []}
    items[LOGS_STREAM] = logs
    with database.session() as session:
        write_batch(session, items, log_lines_per_attempt=cap)


def stored(database: Database, attempt_id: int) -> tuple[list[int], int, int]:
    """The attempt's stored seqs (in id order), its stored count and its dropped count."""
    with database.session() as session:
        seqs = session.scalars(
            select(LogLine.seq).where(LogLine.attempt_id == attempt_id).order_by(LogLine.id)
        ).all()
        attempt = session.get_one(Attempt, attempt_id)
        return list(seqs), attempt.log_lines, attempt.log_lines_dropped


def test_the_newest_cap_lines_are_kept_and_the_oldest_counted(
    database: Database, new_attempt: NewAttempt
) -> None:
    """3 x cap + 50 lines in batches small and large (COPY on PostgreSQL from 64 rows)."""
    _, attempt = new_attempt()
    _, other = new_attempt()
    write(database, lines(attempt, range(0, 30)))
    write(database, lines(other, range(0, 40)))
    assert stored(database, attempt) == (list(range(30)), 30, 0)  # under the cap: untouched
    for start in range(30, 230, 50):
        write(database, lines(attempt, range(start, start + 50)))
    write(database, lines(attempt, range(230, 350)))  # one batch larger than the cap
    seqs, count, dropped = stored(database, attempt)
    assert seqs == list(range(250, 350)) and (count, dropped) == (CAP, 250)
    assert stored(database, other) == (list(range(40)), 40, 0)  # another attempt: its own


def test_a_replayed_batch_neither_counts_twice_nor_drops_too_many(
    database: Database, new_attempt: NewAttempt
) -> None:
    _, attempt = new_attempt()
    write(database, lines(attempt, range(0, 90)))
    write(database, lines(attempt, range(0, 90)))  # replayed: counted, not stored
    assert stored(database, attempt) == (list(range(90)), 90, 0)  # recounted, nothing lost
    write(database, lines(attempt, range(90, 110)))
    assert stored(database, attempt) == (list(range(10, 110)), CAP, 10)


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def test_the_ingest_consumer_applies_its_cap(
    database: Database, client: redis.Redis, new_attempt: NewAttempt
) -> None:
    """Through the real stream: the cap given to Ingest (the app passes the setting)."""
    _, attempt = new_attempt()
    ingest = Ingest(db=database, client=client, consumer="a", log_lines_per_attempt=CAP)
    ingest.ensure_groups()
    stream = ingest._streams[LOGS_STREAM]
    for batch, start in enumerate(range(0, 3 * CAP + 7, 61)):
        items = lines(attempt, range(start, min(start + 61, 3 * CAP + 7)))
        body = {"producer": "test", "seq": batch, "items": items}
        client.xadd(stream, {BATCH_FIELD: json.dumps(body)})
    ingest.drain()
    seqs, count, dropped = stored(database, attempt)
    assert seqs == list(range(2 * CAP + 7, 3 * CAP + 7)) and (count, dropped) == (CAP, 2 * CAP + 7)
