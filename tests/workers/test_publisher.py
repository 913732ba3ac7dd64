"""StreamPublisher: numbered batches, one XADD each, and nothing lost while Redis is away."""

from __future__ import annotations

import json
import time

import redis
from worker_helpers import PrivateRedis, read_items, wait_for

from workers.contract.protocol import Batch
from workers.telemetry import StreamPublisher, encode


def batches(url: str, stream: str) -> list[Batch]:
    client = redis.Redis.from_url(url)
    entries = client.xrange(stream)
    client.close()
    return [Batch.model_validate_json(fields[b"b"]) for _, fields in entries]


def test_items_arrive_in_numbered_batches_of_at_most_500(redis_url: str) -> None:
    publisher = StreamPublisher(redis_url, "tb:test", "producer-a")
    for i in range(1234):
        publisher.add({"i": i})
    publisher.close()

    found = batches(redis_url, "tb:test")
    assert [b.seq for b in found] == list(range(len(found)))
    assert {b.producer for b in found} == {"producer-a"}
    assert all(1 <= len(b.items) <= 500 for b in found)
    assert [item["i"] for b in found for item in b.items] == list(range(1234))


def test_items_added_slowly_are_flushed_within_a_tenth_of_a_second(redis_url: str) -> None:
    publisher = StreamPublisher(redis_url, "tb:test", "producer-b")
    publisher.add({"x": 1})
    wait_for(lambda: read_items(redis_url, "tb:test"), timeout=1.0, what="first flush")
    publisher.add({"x": 2})
    wait_for(lambda: len(read_items(redis_url, "tb:test")) == 2, timeout=1.0, what="second")
    publisher.close()
    assert [b.seq for b in batches(redis_url, "tb:test")] == [0, 1]


def test_add_never_blocks_and_buffered_items_arrive_after_redis_returns(
    private_redis: PrivateRedis,
) -> None:
    publisher = StreamPublisher(private_redis.url, "tb:test", "producer-c")
    publisher.add({"i": 0})
    wait_for(lambda: read_items(private_redis.url, "tb:test"), what="delivery while up")

    private_redis.stop()
    started = time.perf_counter()
    for i in range(1, 2001):
        publisher.add({"i": i})
    assert time.perf_counter() - started < 0.5  # training never waits for Redis
    time.sleep(0.5)  # the publisher tries and fails a few times meanwhile
    assert publisher.backlog == 2000

    private_redis.start()  # an empty server: only what was buffered can show up
    wait_for(lambda: publisher.backlog == 0, timeout=15, what="backlog to drain")
    publisher.close()
    found = batches(private_redis.url, "tb:test")
    assert [item["i"] for b in found for item in b.items] == list(range(1, 2001))
    assert [b.seq for b in found] == list(range(1, len(found) + 1))  # seq 0 went to the old server


def test_close_with_redis_gone_returns_within_its_timeout(private_redis: PrivateRedis) -> None:
    publisher = StreamPublisher(private_redis.url, "tb:test", "producer-d")
    private_redis.stop()
    publisher.add({"i": 1})
    started = time.perf_counter()
    publisher.close(timeout=1.0)
    assert time.perf_counter() - started < 2.0


def test_a_batch_is_the_json_that_json_dumps_writes_nan_and_surrogates_included() -> None:
    items = [
        {"attempt_id": 7, "rank": 1, "step": 3, "name": "loss", "value": 0.1 + 0.2, "time": 1e9},
        {"name": "tiny", "value": 5e-324},
        {"name": "nan", "value": float("nan")},
        {"name": "inf", "value": float("-inf")},
        {"message": "é ✓"},
    ]
    batch = {"producer": "p", "seq": 0, "items": items}
    # decoded and written again by json.dumps: the same text (NaN != NaN rules out ==)
    assert json.dumps(json.loads(encode(batch))) == json.dumps(batch)
    odd = {"producer": "p", "seq": 1, "items": [{"message": "bad \udcff byte"}]}
    assert json.loads(encode(odd)) == odd  # pydantic-core refuses it; json.dumps escapes it


def test_add_many_queues_under_one_lock_and_arrives_in_order(redis_url: str) -> None:
    publisher = StreamPublisher(redis_url, "tb:test", "producer-e")
    publisher.add_many({"i": i} for i in range(700))
    publisher.add({"i": 700})
    publisher.close()
    assert [item["i"] for b in batches(redis_url, "tb:test") for item in b.items] == list(
        range(701)
    )


class CountingPublisher(StreamPublisher):
    """Counts the flush attempts of its thread: each is one wake-up."""

    flushes = 0

    def _flush_one(self) -> bool:
        self.flushes += 1
        return super()._flush_one()


def test_an_idle_publisher_sleeps_until_an_item_comes_and_writes_it_at_once(
    redis_url: str,
) -> None:
    publisher = CountingPublisher(redis_url, "tb:test", "producer-f", flush_interval=0.01)
    time.sleep(0.3)  # 30 intervals: a publisher on a timer would have woken ~30 times
    assert publisher.flushes <= 2  # the first interval finds nothing, then it sleeps
    publisher.add({"x": 1})  # wakes it: the item is written without waiting for a timer
    wait_for(lambda: read_items(redis_url, "tb:test"), timeout=5.0, what="the woken flush")
    publisher.add_many({"x": i} for i in range(2, 5))
    publisher.close()
    assert [item["x"] for b in batches(redis_url, "tb:test") for item in b.items] == [1, 2, 3, 4]


def test_an_item_to_an_idle_publisher_goes_at_once_and_later_ones_wait_out_the_window(
    redis_url: str,
) -> None:
    publisher = StreamPublisher(redis_url, "tb:test", "producer-g", flush_interval=2.0)
    publisher.add({"x": 1})  # nothing queued, no write for a window: written at once
    wait_for(lambda: read_items(redis_url, "tb:test"), timeout=1.5, what="the first item")
    # its write cycle over (an item added while a cycle still runs goes out in that cycle)
    wait_for(lambda: publisher._idle, timeout=1.5, what="the publisher to go idle")
    publisher.add({"x": 2})  # within the window of that write: waits for the window's end
    assert len(read_items(redis_url, "tb:test")) == 1
    wait_for(lambda: len(read_items(redis_url, "tb:test")) == 2, timeout=5.0, what="the window")
    publisher.close()
    assert [b.seq for b in batches(redis_url, "tb:test")] == [0, 1]
