"""Publishers across a Redis outage: metric points all arrive, device samples drop oldest first."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable

import pytest
import redis

from backend.db import Database
from backend.telemetry.ingest.consumer import Ingest
from tests.telemetry.helpers import count_points, point, stored_steps
from tests.workers.worker_helpers import PrivateRedis, wait_for
from workers.contract.protocol import DEVICES_STREAM, METRICS_STREAM, Batch
from workers.telemetry import StreamPublisher


def batches(url: str, stream: str) -> list[Batch]:
    client = redis.Redis.from_url(url)
    found = [Batch.model_validate_json(f[b"b"]) for _, f in client.xrange(stream)]
    client.close()
    return found


def test_a_full_buffer_drops_the_oldest_device_samples_and_says_so(
    private_redis: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    devices = StreamPublisher(private_redis.url, DEVICES_STREAM, "agent", max_buffer=10)
    metrics = StreamPublisher(private_redis.url, METRICS_STREAM, "rank", max_buffer=10)
    private_redis.stop()
    for i in range(25):
        devices.add({"i": i})
        metrics.add({"i": i})
    # the buffer keeps its newest 10; the thread (woken by the first add) may have taken a
    # batch of at most 10 older ones for a write that failed: those wait too, never dropped
    kept = devices.backlog
    assert 10 <= kept <= 20 and devices.dropped == 25 - kept
    assert (metrics.dropped, metrics.backlog) == (0, 25)

    private_redis.start()
    with caplog.at_level(logging.WARNING, logger="workers.telemetry"):
        wait_for(lambda: devices.backlog == metrics.backlog == 0, timeout=15, what="the drain")
    devices.close()
    metrics.close()
    sent = batches(private_redis.url, DEVICES_STREAM)
    items = [i["i"] for b in sent for i in b.items]
    assert items[-10:] == list(range(15, 25)) and items == sorted(items) and len(items) == kept
    # the ingest learns of the gap, not only this process's log
    assert sum(b.dropped for b in sent) == devices.dropped
    logged = re.findall(r"tb:devices: dropped the (\d+) oldest items", caplog.text)
    assert sum(map(int, logged)) == devices.dropped
    assert [i["i"] for b in batches(private_redis.url, METRICS_STREAM) for i in b.items] == list(
        range(25)
    )


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["migrated_postgres_url"], indirect=True, ids=["postgres"])
def test_a_publisher_that_loses_redis_for_10_s_delivers_every_point(
    private_redis: PrivateRedis,
    database: Database,
    new_attempt: Callable[..., tuple[int, int]],
) -> None:
    _, attempt = new_attempt()
    stop = threading.Event()
    ingest = Ingest(db=database, client=redis.Redis.from_url(private_redis.url), consumer="i")
    consumer = threading.Thread(target=ingest.run, args=(stop,), daemon=True)
    consumer.start()
    publisher = StreamPublisher(private_redis.url, METRICS_STREAM, "rank-0")
    step = 0

    def publish_for(seconds: float) -> None:
        nonlocal step
        for _ in range(int(seconds * 100)):
            publisher.add(point(attempt, step))
            step += 1
            stop.wait(0.01)

    publish_for(1.0)
    wait_for(lambda: count_points(database) == step, timeout=10, what="points before the outage")
    private_redis.stop()  # Redis is gone, and with it everything it held
    publish_for(10.0)
    private_redis.start()
    publish_for(1.0)
    wait_for(lambda: count_points(database) == step, timeout=30, what="every point")
    stop.set()
    consumer.join(5)
    publisher.close()
    assert stored_steps(database, attempt) == list(range(step))
