"""A rank's end of its telemetry pipe: JSON lines written to the fd its supervisor gave it.

`send` only queues the message: a writer thread serializes what is queued and writes it in
one go every FLUSH_INTERVAL (sooner when a batch fills), so the training thread neither
encodes JSON nor wakes the supervisor's relay on every report. Order is kept.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from typing import Any

log = logging.getLogger(__name__)

#: the longest a message waits here: the relay's publisher window, so the pipe adds ~2.5 ms
#: (median) to report → websocket (docs/benchmarks.md "Live delivery", per-hop times)
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
        self._cycles = 0  # write cycles completed
        self._interval = flush_interval
        self._writer = threading.Thread(target=self._run, name="telemetry-pipe", daemon=True)
        self._writer.start()

    def send(self, message: dict[str, Any]) -> None:
        """Queue one message (never blocks training; the writer sends it within the interval)."""
        if self._broken:
            return
        self._queue.append(message)
        if len(self._queue) >= BATCH:
            self._wake.set()

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until everything queued so far is written to the pipe."""
        deadline = time.monotonic() + timeout
        with self._idle:
            # a cycle may be writing already; the one after it starts after this call
            wanted = self._cycles + 2
            while self._cycles < wanted and not self._broken:
                # woken again for each cycle: one wake gave one cycle, and the second then
                # came only at the end of the writer's interval (or of this timeout)
                self._wake.set()
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._idle.wait(left)

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued, then close this end (the supervisor then sees end-of-file)."""
        if self._closing:
            return
        self._closing = True
        self._wake.set()
        self._writer.join(timeout)

    def _run(self) -> None:
        while True:
            self._wake.wait(self._interval)
            self._wake.clear()
            closing = self._closing
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
