"""A job's run directory has a quota: the supervisor measures it and ends the attempt over it.

Without one, a job filled its node's disk at its own pace (1 GiB in 6.8 s here), taking
every other job's checkpoints on the node with it. A thread measures the job's whole
directory (`runs/job-<id>/`: every attempt's files, checkpoints, `home/`, `tmp/`) every
`interval` seconds, counting allocated blocks (a sparse file costs what it holds), each
inode once, following no link; a walk that takes long spaces the next one out (ten times
its duration), so a tree of many small files costs a bounded share of one core. Once over
the quota it says so and the supervisor ends the attempt failed, naming the sizes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def size_text(count: int) -> str:
    """Bytes as people read them: 1.5 GiB, 20 MiB, 512 B."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def disk_usage(path: Path, *, stop_above: int | None = None) -> int:
    """Bytes allocated under path (links not followed, each inode once); the walk ends early
    once the count is above stop_above."""
    seen: set[tuple[int, int]] = set()
    total = 0
    try:
        root = os.open(path, _DIR_FLAGS)
    except OSError:
        return 0
    pending = [root]
    try:
        while pending:
            fd = pending.pop()
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        with contextlib.suppress(OSError):
                            info = entry.stat(follow_symlinks=False)
                            if (info.st_dev, info.st_ino) in seen:
                                continue
                            seen.add((info.st_dev, info.st_ino))
                            total += info.st_blocks * 512
                            if stat.S_ISDIR(info.st_mode):
                                pending.append(os.open(entry.name, _DIR_FLAGS, dir_fd=fd))
            finally:
                os.close(fd)
            if stop_above is not None and total > stop_above:
                break
    finally:
        for fd in pending:
            os.close(fd)
    return total


class RunDirQuota:
    """Measures a job's directory in the background; `over` says why once it is too big."""

    def __init__(self, job_dir: Path, *, limit: int, interval: float) -> None:
        self.job_dir, self.limit, self.interval = job_dir, limit, interval
        #: why the attempt must end (the sizes), once the directory went over the quota
        self.over: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"quota-{job_dir.name}", daemon=True)

    def start(self) -> None:
        """Start measuring (a limit of 0 means no quota: nothing starts)."""
        if self.limit > 0:
            self._thread.start()

    def stop(self) -> None:
        """Stop measuring."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)

    def check(self) -> str | None:
        """Measure once now; the reason when over the quota."""
        used = disk_usage(self.job_dir, stop_above=self.limit)
        if used > self.limit:
            self.over = f"run dir over quota ({size_text(used)} of {size_text(self.limit)})"
        return self.over

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                if self.check() is not None:
                    return
            except Exception:  # a measuring bug must not end the attempt
                log.exception("measuring %s failed", self.job_dir)
            took = time.monotonic() - started
            self._stop.wait(max(self.interval, 10 * took))
