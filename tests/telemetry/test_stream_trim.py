"""Stream trimming on real Redis when acknowledgements land in the middle of its reads.

`trim_acknowledged` reads the group (XINFO GROUPS), then its pending summary (XPENDING),
then the first undelivered entry (XRANGE). The ingest's commit thread acknowledges entries
at any moment in between; these tests put an acknowledgement exactly there (a client that
acknowledges before its own XPENDING or XRANGE call goes to the server) and check that
the trim neither fails nor deletes an entry that was unacknowledged when it started.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from backend.telemetry.ingest.streams import oldest_unacknowledged, trim_acknowledged
from workers.contract.protocol import INGEST_GROUP

STREAM = "trim-race-test"


class InterruptedClient(redis.Redis):
    """A real client that lets another consumer act just before one of its commands runs."""

    def __init__(self, client: redis.Redis, command: str, meanwhile: Callable[[], None]) -> None:
        super().__init__(connection_pool=client.connection_pool)
        self.before, self.meanwhile, self.interrupted = command, meanwhile, False

    def _interrupt(self, command: str) -> None:
        if command == self.before and not self.interrupted:
            self.interrupted = True
            self.meanwhile()

    def xpending(self, *args: Any, **kwargs: Any) -> Any:
        self._interrupt("xpending")
        return super().xpending(*args, **kwargs)

    def xrange(self, *args: Any, **kwargs: Any) -> Any:
        self._interrupt("xrange")
        return super().xrange(*args, **kwargs)


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    client.xgroup_create(STREAM, INGEST_GROUP, id="0", mkstream=True)
    yield client
    client.close()


def fill(client: redis.Redis, entries: int) -> list[bytes]:
    """Many small entries, so that approximate trimming can free whole nodes."""
    pipe = client.pipeline(transaction=False)
    for n in range(entries):
        pipe.xadd(STREAM, {"n": n})
    return [
        entry_id if isinstance(entry_id, bytes) else entry_id.encode()
        for entry_id in pipe.execute()
    ]


def delivered(client: redis.Redis, count: int) -> list[bytes]:
    reply: Any = client.xreadgroup(INGEST_GROUP, "a", {STREAM: ">"}, count=count)
    return [entry_id for entry_id, _ in reply[0][1]]


def ack(client: redis.Redis, ids: list[bytes]) -> None:
    client.xack(STREAM, INGEST_GROUP, *ids)


def remaining(client: redis.Redis) -> set[bytes]:
    reply: Any = client.xrange(STREAM)
    return {entry_id for entry_id, _ in reply}


def test_everything_pending_acknowledged_before_xpending(client: redis.Redis) -> None:
    ids = fill(client, 1_000)
    pending = delivered(client, 600)  # 600 pending, 400 never delivered
    racing = InterruptedClient(client, "xpending", lambda: ack(client, pending))

    trim_acknowledged(racing, STREAM)  # XPENDING answers min=None: must not be sent as an id

    assert racing.interrupted  # the acknowledgement did land between the two reads
    assert set(ids[600:]) <= remaining(client)  # the undelivered entries all stay
    assert len(remaining(client)) < 1_000  # and what was acknowledged did go (whole nodes)


def test_delivered_and_acknowledged_before_xrange(client: redis.Redis) -> None:
    ids = fill(client, 1_000)
    ack(client, delivered(client, 400))
    # nothing pending when the group is read; 300 more delivered and acknowledged before XRANGE
    racing = InterruptedClient(client, "xrange", lambda: ack(client, delivered(client, 300)))

    trim_acknowledged(racing, STREAM)

    assert racing.interrupted
    assert set(ids[400:]) <= remaining(client)  # undelivered when the trim began: kept


def test_oldest_unacknowledged_through_the_race(client: redis.Redis) -> None:
    ids = fill(client, 10)
    pending = delivered(client, 4)
    assert oldest_unacknowledged(client, STREAM) == ids[0].decode()
    racing = InterruptedClient(client, "xpending", lambda: ack(client, pending))
    assert oldest_unacknowledged(racing, STREAM) == ids[4].decode()  # the first undelivered
    ack(client, delivered(client, 6))
    assert oldest_unacknowledged(client, STREAM) is None
