"""StreamPublisher: numbered batches, one XADD each, and nothing lost while Redis is away."""

from __future__ import annotations

import time

import redis
from worker_helpers import PrivateRedis, read_items, wait_for

from workers.protocol import Batch
from workers.telemetry import StreamPublisher


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
