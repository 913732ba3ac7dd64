"""A rank's end of its telemetry pipe: JSON lines written to the fd its supervisor gave it.

`send` only queues the message: a writer thread serializes what is queued and writes it in
one go, at most once every FLUSH_INTERVAL (sooner when a batch fills), so the training
thread neither encodes JSON nor wakes the supervisor's relay on every report. The window is
leading-edge, as the relay's publisher's: a report that comes to an idle writer whose last
write began a window ago is written at once, and one that comes sooner waits for the rest
of the window; an idle writer sleeps until a report comes. Order is kept.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections import deque
from typing import Any

log = logging.getLogger(__name__)

#: the shortest time between two writes, so the longest a message waits here: the relay's
#: publisher window. A steady stream of reports waits ~2.5 ms (median), a report to an idle
#: writer nothing (docs/benchmarks.md "Live delivery", per-hop times)
FLUSH_INTERVAL = 0.005
#: queued messages that wake the writer before its interval ends
BATCH = 256


class TelemetryChannel:
    """Queues messages for the inherited pipe; silent once the supervisor's end is gone."""

    def __init__(self, fd: int, *, flush_interval: float = FLUSH_INTERVAL) -> None:
        self._fd = fd
        self._queue: deque[dict[str, Any]] = deque()
        self._wake = threading.Event()
        self._idle = threading.Condition()
        self._closing = False
        self._broken = False
        self._sleeping = False  # the writer waits for a send (nothing queued)
        self._flushing = 0  # flush() calls waiting for the writer
        self._cycles = 0  # write cycles completed
        self._interval = flush_interval
        self._writer = threading.Thread(target=self._run, name="telemetry-pipe", daemon=True)
        self._writer.start()

    def send(self, message: dict[str, Any]) -> None:
        """Queue one message (never blocks training; the writer sends it within the interval)."""
        if self._broken:
            return
        self._queue.append(message)
        if self._sleeping or len(self._queue) >= BATCH:
            self._wake.set()

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until everything queued so far is written to the pipe."""
        deadline = time.monotonic() + timeout
        with self._idle:
            self._flushing += 1  # the writer does not wait for its window meanwhile
            try:
                # a cycle may be writing already; the one after it starts after this call
                wanted = self._cycles + 2
                while self._cycles < wanted and not self._broken:
                    # woken again for each cycle: one wake gave one cycle, and the second
                    # then came only at the end of the writer's interval (or of this timeout)
                    self._wake.set()
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return
                    self._idle.wait(left)
            finally:
                self._flushing -= 1

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued, then close this end (the supervisor then sees end-of-file)."""
        if self._closing:
            return
        self._closing = True
        self._wake.set()
        self._writer.join(timeout)

    def _run(self) -> None:
        last_write = -math.inf  # when the previous write began (monotonic)
        while True:
            # `send` reads _sleeping after its append: set first, then look at the queue,
            # so a message appended meanwhile is either seen here or wakes the wait
            self._sleeping = True
            if not self._queue and not self._closing:
                self._wake.wait()
            self._sleeping = False
            self._wake.clear()
            wait = last_write + self._interval - time.monotonic()
            if wait > 0 and not self._closing and not self._flushing:
                self._wake.wait(wait)  # one write a window at most; a full batch cuts it
                self._wake.clear()
            closing = self._closing
            last_write = time.monotonic()
            self._write_queued()
            if closing:
                break
        if not self._broken:
            self._broken = True
            os.close(self._fd)

    def _write_queued(self) -> None:
        lines = []
        while self._queue:
            lines.append(json.dumps(self._queue.popleft(), separators=(",", ":")))
        if lines and not self._broken:
            self._write(("\n".join(lines) + "\n").encode())
        with self._idle:
            self._cycles += 1
            self._idle.notify_all()

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as err:  # the supervisor is gone: training goes on, unreported
            self._broken = True
            self._queue.clear()
            log.warning("telemetry pipe closed (%s): further points are not reported", err)
