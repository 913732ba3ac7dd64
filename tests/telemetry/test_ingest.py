"""The ingest on real Redis and a real database: replays and trimming add or lose nothing."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
import redis

from backend.db import Database
from backend.telemetry.ingest import Ingest, Round, Written
from backend.telemetry.live import LIVE_STREAM
from backend.telemetry.streams import backlog, trim_acknowledged
from tests.telemetry.helpers import count_points, point, stored_steps
from workers.protocol import BATCH_FIELD, DEVICES_STREAM, INGEST_GROUP, METRICS_STREAM

NewAttempt = Callable[..., tuple[int, int]]


def add_batch(
    client: redis.Redis, stream: str, items: list[dict[str, object]], seq: int = 0
) -> None:
    batch = {"producer": "test", "seq": seq, "items": items}
    client.xadd(stream, {BATCH_FIELD: json.dumps(batch)})


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def ingest(database: Database, client: redis.Redis) -> Ingest:
    """One ingest consumer, its groups created."""
    consumer = Ingest(db=database, client=client, consumer="a")
    consumer.ensure_groups()
    return consumer


def test_a_replayed_batch_adds_no_rows(
    database: Database, client: redis.Redis, ingest: Ingest, new_attempt: NewAttempt
) -> None:
    _, attempt = new_attempt()
    batch = [point(attempt, step, rank=rank) for step in range(300) for rank in range(2)]
    add_batch(client, METRICS_STREAM, batch)
    ingest.consume()
    assert count_points(database) == 600

    add_batch(client, METRICS_STREAM, batch, seq=1)  # the producer sent it again
    add_batch(client, METRICS_STREAM, batch[:5] + batch[:5], seq=2)  # and repeated itself
    assert ingest.consume() == 2
    assert count_points(database) == 600
    assert stored_steps(database, attempt) == sorted(list(range(300)) * 2)


def test_every_entry_is_acknowledged_after_commit_and_its_deltas_go_live(
    database: Database, client: redis.Redis, ingest: Ingest, new_attempt: NewAttempt
) -> None:
    job, attempt = new_attempt()
    add_batch(client, METRICS_STREAM, [point(attempt, s) for s in range(100)])
    sample = {"node": "n", "device": 0, "kind": "gpu", "time": 5.0, "util": 50.0}
    add_batch(client, DEVICES_STREAM, [sample])
    ingest.consume()
    assert client.xpending(METRICS_STREAM, INGEST_GROUP)["pending"] == 0
    live = {
        fields[b"t"].decode(): json.loads(fields[b"d"]) for _, fields in client.xrange(LIVE_STREAM)
    }
    assert [p["step"] for p in live[f"job:{job}"]["metrics"]] == list(range(100))
    assert live["cluster"]["samples"][0]["util"] == 50.0


def test_non_finite_values_and_hostile_items_are_not_stored_and_the_rest_is(
    database: Database, client: redis.Redis, ingest: Ingest, new_attempt: NewAttempt
) -> None:
    _, attempt = new_attempt()
    diverged = [point(attempt, s) for s in range(6)]
    diverged[1]["value"] = float("nan")  # json.dumps writes NaN / Infinity, as publishers do
    diverged[2]["value"] = float("inf")
    diverged[3]["step"] = 2**31  # out of the column's range: refused alone
    diverged[4]["time"] = float("nan")
    add_batch(client, METRICS_STREAM, diverged)
    assert ingest.consume() == 1
    assert stored_steps(database, attempt) == [0, 5]


def test_trimming_keeps_every_unacknowledged_entry(
    database: Database, client: redis.Redis, ingest: Ingest, new_attempt: NewAttempt
) -> None:
    _, attempt = new_attempt()
    for seq in range(300):
        add_batch(client, METRICS_STREAM, [point(attempt, seq)], seq=seq)
    ingest.count = 200
    ingest.consume()  # entries 0..199 are stored and acknowledged
    client.xreadgroup(INGEST_GROUP, "dead", {METRICS_STREAM: ">"}, count=50)  # read, never acked
    assert backlog(client, METRICS_STREAM).pending == 50

    trim_acknowledged(client, METRICS_STREAM)
    remaining = client.xrange(METRICS_STREAM)
    seqs = [json.loads(fields[b"b"])["seq"] for _, fields in remaining]
    assert seqs[-100:] == list(range(200, 300))  # the pending and the undelivered entries stay
    assert len(remaining) < 300  # (approximate trimming frees whole nodes only)

    ingest.reclaim_idle_ms = 0
    assert ingest.reclaim() == 50
    ingest.consume()
    assert count_points(database) == 300
    assert backlog(client, METRICS_STREAM) == backlog(client, METRICS_STREAM).__class__(0, 0, 0.0)


def test_a_drained_backlog_commits_in_order_and_a_failed_round_stays_pending(
    database: Database,
    client: redis.Redis,
    ingest: Ingest,
    new_attempt: NewAttempt,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, attempt = new_attempt()
    for seq in range(12):
        add_batch(client, METRICS_STREAM, [point(attempt, seq * 100 + s) for s in range(100)], seq)
    ingest.count = 3  # four rounds: on PostgreSQL each is validated while the last commits
    write = ingest.write
    rounds = []

    def third_round_fails(round_: Round) -> Written:
        rounds.append(round_)
        if len(rounds) == 3:
            raise RuntimeError("database went away")
        return write(round_)

    monkeypatch.setattr(ingest, "write", third_round_fails)
    with pytest.raises(RuntimeError):
        ingest.drain()
    assert count_points(database) == 600  # the first two rounds
    # the failed round stays pending, and on PostgreSQL the one read while it committed
    threaded = database.engine.dialect.name == "postgresql"
    assert client.xpending(METRICS_STREAM, INGEST_GROUP)["pending"] == (6 if threaded else 3)

    monkeypatch.setattr(ingest, "write", write)
    while ingest.consume(pending=True):  # as `run` does after a failed pass, then goes on
        pass
    ingest.drain()
    assert stored_steps(database, attempt) == list(range(1200))
    assert backlog(client, METRICS_STREAM).pending == 0
    live = [json.loads(fields[b"d"]) for _, fields in client.xrange(LIVE_STREAM)]
    steps = [p["step"] for delta in live for p in delta["metrics"]]
    assert steps == list(range(1200))  # live in the order committed
