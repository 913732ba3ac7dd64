"""Batched, non-blocking publishing of telemetry items to one Redis Stream.

Streams are never trimmed here: trimming by length could delete entries the backend
ingest has not acknowledged yet, so the ingest trims behind its consumer group.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

import pydantic_core
import redis
from pydantic import BaseModel

from workers.contract.protocol import BATCH_FIELD, DEVICES_STREAM, LOGS_STREAM

log = logging.getLogger(__name__)

#: streams whose oldest buffered items may be dropped when the buffer is full; metric
#: points and attempt events are never dropped (their buffer grows past the bound instead)
LOSSY_STREAMS = frozenset({DEVICES_STREAM, LOGS_STREAM})
#: the shortest time between two write cycles (sooner when a batch fills): an item that
#: comes while nothing is queued is written at once if the last cycle began this long ago,
#: else when it is this old; so it waits here at most this long (plus the XADD). An idle
#: publisher sleeps until an item comes (an idle worker's publishers cost no wake-ups:
#: docs/benchmarks.md, "An idle trainboard up"). 5 ms: the per-hop times and what a
#: shorter or longer window costs (XADDs, ingest rounds, CPU) are in docs/benchmarks.md,
#: "Live delivery"
FLUSH_INTERVAL = 0.005


class StreamPublisher:
    """Queue items in memory; a background thread XADDs them as numbered batches."""

    def __init__(
        self,
        redis_url: str,
        stream: str,
        producer: str,
        *,
        flush_interval: float = FLUSH_INTERVAL,
        batch_size: int = 500,
        max_buffer: int = 200_000,
        lossy: bool | None = None,
    ) -> None:
        self.stream = stream
        self.producer = producer
        self.seq = 0
        #: items dropped so far (only a lossy publisher drops)
        self.dropped = 0
        self.lossy = stream in LOSSY_STREAMS if lossy is None else lossy
        self._reported_drops = 0
        self._over_bound_warned = False
        self._flush_interval = flush_interval
        self._batch_size = batch_size
        self._buffer: deque[dict[str, Any]] = deque()
        self._max_buffer = max_buffer
        self._pending: list[dict[str, Any]] = []
        self._pending_drops = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = False  # the thread sleeps until add_many wakes it (lock held to change)
        self._closing = threading.Event()
        self._redis = redis.Redis.from_url(
            redis_url, socket_timeout=2.0, socket_connect_timeout=1.0
        )
        self._thread = threading.Thread(target=self._run, name=f"publisher:{stream}", daemon=True)
        self._thread.start()

    def add(self, item: dict[str, Any] | BaseModel) -> None:
        """Queue one item; never blocks on Redis (a lossy publisher drops its oldest when full)."""
        self.add_many((item.model_dump(mode="json") if isinstance(item, BaseModel) else item,))

    def add_many(self, items: Iterable[dict[str, Any]]) -> None:
        """Queue several items under one lock (a training step's metric points)."""
        with self._lock:
            for item in items:
                if len(self._buffer) >= self._max_buffer:
                    self._over_bound()
                self._buffer.append(item)
            wake = self._idle or len(self._buffer) >= self._batch_size
            self._idle = False
        if wake:
            self._wake.set()

    def close(self, timeout: float = 5.0) -> None:
        """Flush what is queued (for at most timeout seconds) and stop the thread."""
        self._closing.set()
        self._wake.set()
        self._thread.join(timeout)
        self._redis.close()

    @property
    def backlog(self) -> int:
        """Items not yet written to Redis."""
        with self._lock:
            return len(self._buffer) + len(self._pending)

    def _over_bound(self) -> None:
        """Called with the lock held and the buffer at its bound."""
        if self.lossy:
            self._buffer.popleft()
            self.dropped += 1
        elif not self._over_bound_warned:
            self._over_bound_warned = True
            log.warning(
                "%s: %d items buffered while Redis is away; none is dropped",
                self.stream,
                len(self._buffer),
            )

    def _run(self) -> None:
        retry_delay = self._flush_interval
        last_write = -math.inf  # when the previous write cycle began (monotonic)
        while True:
            with self._lock:  # nothing queued: sleep until add_many wakes us
                idle = self._idle = not self._buffer and not self._pending
            if idle:
                self._wake.wait()
            self._wake.clear()
            wait = last_write + self._flush_interval - time.monotonic()
            if wait > 0 and not self._closing.is_set():
                self._wake.wait(wait)  # one cycle a window at most; a full batch or close cuts it
                self._wake.clear()
            closing = self._closing.is_set()
            try:
                last_write = time.monotonic()
                while self._flush_one():
                    pass
                retry_delay = self._flush_interval
            except redis.RedisError as err:
                if closing:
                    log.warning("%s: %d items not delivered: %s", self.stream, self.backlog, err)
                    return
                log.debug("%s: Redis unreachable (%s); buffering", self.stream, err)
                retry_delay = min(retry_delay * 2, 1.0)
                self._closing.wait(retry_delay)
                continue
            if closing:
                return

    def _flush_one(self) -> bool:
        """Write the pending batch (taking a new one if none); False when nothing is left."""
        with self._lock:
            if not self._pending:
                count = min(len(self._buffer), self._batch_size)
                self._pending = [self._buffer.popleft() for _ in range(count)]
                self._pending_drops = self.dropped - self._reported_drops
                self._over_bound_warned = False
            items, drops = self._pending, self._pending_drops
        if not items:
            return False
        batch: dict[str, Any] = {"producer": self.producer, "seq": self.seq, "items": items}
        if drops:
            batch["dropped"] = drops
        self._xadd(batch)
        with self._lock:
            self._pending = []
            self._reported_drops += drops
            self.seq += 1
        if drops:
            log.warning(
                "%s: dropped the %d oldest items while the buffer was full (Redis away)",
                self.stream,
                drops,
            )
        return True

    def _xadd(self, batch: dict[str, Any]) -> Any:
        """Append one batch to the stream; its entry id (benchmarks time this call)."""
        return self._redis.xadd(self.stream, {BATCH_FIELD: encode(batch)})


def encode(batch: dict[str, Any]) -> bytes:
    """A batch as JSON: pydantic-core's encoder, json.dumps for what it refuses.

    Both write the same values (NaN and Infinity as those constants; floats in their shortest
    round-trip form). pydantic-core takes about a fifth of json.dumps's time, most of which is
    float repr, on the publisher thread of every rank. It refuses a lone surrogate (a path
    decoded with surrogateescape, say), which json.dumps escapes.
    """
    try:
        return pydantic_core.to_json(batch, inf_nan_mode="constants")
    except pydantic_core.PydanticSerializationError:
        return json.dumps(batch, separators=(",", ":"), allow_nan=True).encode()


def producer_name(*parts: object) -> str:
    """A producer id unique to this process run: the given parts, then pid and start time."""
    return "/".join([*map(str, parts), f"{os.getpid()}-{int(time.time() * 1000)}"])
