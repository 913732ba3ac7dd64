"""The ingest on real Redis and a real database: replays and trimming add or lose nothing."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from sqlalchemy import update

from backend.db import Database
from backend.jobs.models import Attempt, Job
from backend.telemetry.ingest import consumer as consumer_module
from backend.telemetry.ingest.consumer import Ingest
from backend.telemetry.ingest.entries import FAST_BATCHES, TYPED_BATCHES
from backend.telemetry.ingest.rounds import Round, Written
from backend.telemetry.ingest.streams import backlog, trim_acknowledged
from backend.telemetry.ingest.writer import write_batch
from backend.telemetry.live.feed import LIVE_STREAM
from tests.telemetry.helpers import count_points, point, stored_steps
from workers.contract.protocol import (
    BATCH_FIELD,
    DEVICES_STREAM,
    INGEST_GROUP,
    METRICS_STREAM,
    DeviceSample,
    GpuProcess,
)

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


def test_a_jobs_step_follows_its_newest_stored_point_and_never_goes_back(
    database: Database, client: redis.Redis, ingest: Ingest, new_attempt: NewAttempt
) -> None:
    job, attempt = new_attempt()
    other_job, other_attempt = new_attempt()

    def step_of(job_id: int) -> int | None:
        with database.session() as session:
            return session.get_one(Job, job_id).step

    add_batch(client, METRICS_STREAM, [point(attempt, s) for s in (3, 7, 5)])
    add_batch(client, METRICS_STREAM, [point(other_attempt, 2)], seq=1)
    ingest.consume()
    assert (step_of(job), step_of(other_job)) == (7, 2)
    add_batch(client, METRICS_STREAM, [point(attempt, 4, rank=1)], seq=2)  # a late rank
    ingest.consume()
    assert step_of(job) == 7


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


def test_entries_a_gone_process_of_this_host_read_are_taken_over_at_once(
    database: Database, client: redis.Redis, ingest: Ingest, new_attempt: NewAttempt
) -> None:
    """`trainboard up` restarts a killed API: its successor stores the round the dead one
    read without waiting out the idle reclaim (CI: a job ended first, 21 steps missing)."""
    _, attempt = new_attempt()
    for seq in range(30):
        add_batch(client, METRICS_STREAM, [point(attempt, seq)], seq=seq)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    living = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        host = socket.gethostname()
        for name, count in ((f"{host}-{gone.pid}", 10), (f"{host}-{living.pid}", 10)):
            client.xreadgroup(INGEST_GROUP, name, {METRICS_STREAM: ">"}, count=count)
        client.xreadgroup(INGEST_GROUP, f"elsewhere-{gone.pid}", {METRICS_STREAM: ">"}, count=10)
        assert ingest.reclaim_idle_ms == 30_000  # nothing is old enough for the idle reclaim

        assert ingest.reclaim_from_gone() == 10  # not the living one's, nor another host's
        assert stored_steps(database, attempt) == list(range(10))
        assert backlog(client, METRICS_STREAM).pending == 20
    finally:
        living.kill()
        living.wait()


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


EDGE_INTS = [-1, 0, 1, 2**31 - 1, 2**31, 2**63, -(2**63) - 1]
#: what a producer might put in a field: every kind JSON has, at and past the bounds
VALUES = st.one_of(
    st.sampled_from(EDGE_INTS),
    st.integers(),
    st.floats(),  # NaN and ±inf included: json.dumps writes them as NaN and Infinity
    st.sampled_from([1.0, -0.0, 1e308, 1e-320, float(2**31)]),
    st.text(max_size=3),
    st.sampled_from(["", "x" * 128, "x" * 129, "é" * 128, "é" * 129, "\ud800"]),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
)
GOOD_POINT = {"attempt_id": 1, "rank": 0, "step": 3, "name": "loss", "value": 0.5, "time": 1.0}
GOOD_ENVELOPE = {"producer": "p", "seq": 0, "dropped": 0}


def mostly(good: object) -> st.SearchStrategy[object]:
    """The good value eight times in ten, else anything or (`...`) nothing."""
    return st.integers(0, 9).flatmap(
        lambda k: st.just(...) if k == 0 else VALUES if k == 1 else st.just(good)
    )


def dicts(good: dict[str, object]) -> st.SearchStrategy[dict[str, object]]:
    """Each field mostly good, now and then missing; now and then an extra field."""
    fields = {name: mostly(value) for name, value in good.items()}
    kept = st.fixed_dictionaries({**fields, "extra": st.one_of(st.just(...), VALUES)})
    return kept.map(lambda d: {k: v for k, v in d.items() if v is not ...})


ITEMS = dicts(GOOD_POINT)
ENVELOPES = st.tuples(dicts(GOOD_ENVELOPE), st.lists(ITEMS, max_size=3)).map(
    lambda pair: {**pair[0], "items": pair[1]}
)


@pytest.mark.slow  # 2,000 generated entries: make test runs it, make test-fast not
@settings(max_examples=2000, deadline=None)
@given(ENVELOPES)
def test_what_the_fastest_validator_takes_pydantic_takes_alike(entry: dict[str, object]) -> None:
    """msgspec's decoding of a metrics entry accepts nothing pydantic's refuses, and agrees."""
    raw = json.dumps(entry)
    try:
        fast = FAST_BATCHES[METRICS_STREAM].decode(raw)
    except msgspec.MsgspecError:
        return  # goes on to pydantic's validation, as before
    items = [msgspec.structs.asdict(item) for item in fast["items"]]
    assert TYPED_BATCHES[METRICS_STREAM].validate_json(raw) == {**fast, "items": items}


def test_an_entry_the_fastest_validator_refuses_is_still_validated_and_stored(
    database: Database, new_attempt: NewAttempt, ingest: Ingest, client: redis.Redis
) -> None:
    _, attempt = new_attempt()
    items = [point(attempt, s) for s in range(4)]
    items[1]["step"] = 1.0  # pydantic takes an integral float for an int; msgspec does not
    items[2]["value"] = float("nan")  # a NaN literal is not JSON msgspec reads
    items[3]["time"] = float("inf")  # refused by both: this item alone is dropped
    add_batch(client, METRICS_STREAM, items)
    assert ingest.drain() == 1
    assert stored_steps(database, attempt) == [0, 1]


def test_a_number_past_the_floats_is_refused_by_both_validators() -> None:
    item = '{"attempt_id": 1, "rank": 0, "step": 0, "name": "l", "value": 1, "time": 1e999}'
    raw = '{"producer": "p", "seq": 0, "items": [' + item + "]}"
    with pytest.raises(msgspec.ValidationError):
        FAST_BATCHES[METRICS_STREAM].decode(raw)
    with pytest.raises(ValidationError):
        TYPED_BATCHES[METRICS_STREAM].validate_json(raw)


def test_a_fenced_attempts_points_after_its_end_are_not_stored(
    database: Database, client: redis.Redis, ingest: Ingest, new_attempt: NewAttempt
) -> None:
    _, attempt = new_attempt()
    ended = datetime.now(UTC)
    with database.session() as session:  # the control plane declared its node lost
        session.execute(
            update(Attempt).where(Attempt.id == attempt).values(state="lost", finished_at=ended)
        )
        session.commit()
    before = [point(attempt, s) | {"time": ended.timestamp() - 10 + s} for s in range(5)]
    after = [point(attempt, s) | {"time": ended.timestamp() + 1 + s} for s in range(5, 10)]
    add_batch(client, METRICS_STREAM, before + after)
    ingest.consume()
    assert stored_steps(database, attempt) == [0, 1, 2, 3, 4]  # trained before it was fenced


def test_a_gpu_sample_with_its_processes_is_stored_and_goes_live(
    client: redis.Redis, ingest: Ingest, new_attempt: NewAttempt
) -> None:
    """As the NVML sampler sends it: found on the first real GPU, where it stopped the ingest."""
    _, attempt = new_attempt()
    holder = GpuProcess(pid=4242, mem_used=3 * 2**30, attempt_id=attempt, rank=0)
    hidden = GpuProcess(pid=77, mem_used=None)  # a process of another user, memory hidden
    sample = DeviceSample(
        node="n", device=0, kind="gpu", time=5.0, util=97.0, processes=[holder, hidden]
    )
    add_batch(client, DEVICES_STREAM, [sample.model_dump()])
    add_batch(client, METRICS_STREAM, [point(attempt, 1)])
    assert ingest.consume() == 2
    assert client.xpending(DEVICES_STREAM, INGEST_GROUP)["pending"] == 0
    live = {
        fields[b"t"].decode(): json.loads(fields[b"d"]) for _, fields in client.xrange(LIVE_STREAM)
    }
    assert live["cluster"]["samples"][0]["processes"] == [
        holder.model_dump(),
        hidden.model_dump(),
    ]


def test_a_delta_that_cannot_be_encoded_does_not_hold_back_the_round(
    client: redis.Redis, ingest: Ingest, new_attempt: NewAttempt, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its rows are committed: it is logged and left out, the entries acknowledged."""
    job, attempt = new_attempt()
    real = write_batch

    def with_an_unencodable_delta(*args: Any, **kwargs: Any) -> Any:
        deltas, progressed = real(*args, **kwargs)
        return [("cluster", {"samples": [object()]}), *deltas], progressed

    monkeypatch.setattr(consumer_module, "write_batch", with_an_unencodable_delta)
    add_batch(client, METRICS_STREAM, [point(attempt, s) for s in range(3)])
    assert ingest.consume() == 1
    assert client.xpending(METRICS_STREAM, INGEST_GROUP)["pending"] == 0
    topics = [fields[b"t"].decode() for _, fields in client.xrange(LIVE_STREAM)]
    assert topics == [f"job:{job}"]
