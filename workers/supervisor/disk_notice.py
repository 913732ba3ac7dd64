"""What a supervisor says about its node's disk: free space, and logs it could not write."""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from pathlib import Path

from workers.contract.protocol import AttemptEvent
from workers.telemetry import StreamPublisher

log = logging.getLogger(__name__)


def free_mib(path: Path) -> int | str:
    """MiB free for unprivileged writers on path's filesystem ('?' if unknown)."""
    try:
        stats = os.statvfs(path)
    except OSError:
        return "?"
    return stats.f_bavail * stats.f_frsize >> 20


def disk_full(error: BaseException, data_dir: Path) -> str | None:
    """What to say when error is a full disk under data_dir; None for any other error."""
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        return f"no space left on device ({free_mib(data_dir)} MiB free)"
    return None


class LogLossNotice:
    """Tells a job once that its logs miss lines on disk (they still reach the board)."""

    def __init__(self, events: StreamPublisher, *, attempt_id: int, node: str) -> None:
        self._events, self._attempt_id, self._node = events, attempt_id, node
        self._told = threading.Lock()  # held once the job was told; never released

    def __call__(self, error: OSError) -> None:
        """A log write failed with error."""
        if not self._told.acquire(blocking=False):
            return
        cause = "no space" if error.errno == errno.ENOSPC else (error.strerror or str(error))
        message = f"logs not written to disk: {cause} on node {self._node}"
        log.warning("attempt %d: %s (%s)", self._attempt_id, message, error)
        event = AttemptEvent(
            attempt_id=self._attempt_id, kind="warning", message=message, time=time.time()
        )
        self._events.add(event)
