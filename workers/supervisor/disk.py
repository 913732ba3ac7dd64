"""What a supervisor says and does about its node's disk: the free space it names, a full
disk in its own error, logs it could not write, and the pause a job's own policy asks for
when a checkpoint finds no space (`checkpoint.on_disk_full: pause`)."""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from pathlib import Path

from workers.contract.protocol import AttemptEvent, AttemptOutcome
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


def paused_for_disk(outcome: AttemptOutcome, *, node: str, data_dir: Path) -> AttemptOutcome:
    """The attempt's outcome when its ranks left to pause the job: stopped, naming the disk.

    The reason leads with "no space left on node X (N MiB free)", then what the ranks said
    (which checkpoint was lost); the job keeps its last good checkpoint to resume from.
    """
    reason = f"no space left on node {node} ({free_mib(data_dir)} MiB free)"
    if outcome.reason:
        reason = f"{reason}: {outcome.reason}"
    update = {"outcome": "stopped", "reason": reason[:4096], "pause": True, "platform_fault": False}
    return outcome.model_copy(update=update)
