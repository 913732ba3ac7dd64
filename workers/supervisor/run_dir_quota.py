"""A job's run directory has a quota: the supervisor measures it and ends the attempt over it.

Without one, a job filled its node's disk at its own pace (1 GiB in 6.8 s here), taking
every other job's checkpoints on the node with it. A thread measures the job's whole
directory (`runs/job-<id>/`: every attempt's files, checkpoints, `home/`, `tmp/`) every
`interval` seconds, counting allocated blocks (a sparse file costs what it holds), each
inode once, following no link; a walk that takes long spaces the next one out (ten times
its duration), so a tree of many small files costs a bounded share of one core; it holds
one open directory per level, and a tree nested deeper than MAX_DEPTH counts as over. Once
over the quota it says so and the supervisor ends the attempt failed, naming the sizes.
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
#: directories nested deeper than this are not walked: the attempt ends over quota
MAX_DEPTH = 256


def size_text(count: int) -> str:
    """Bytes as people read them: 1.5 GiB, 20 MiB, 512 B."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


class TooDeep(Exception):
    """The directory nests deeper than MAX_DEPTH: not measured, and over any quota."""


def disk_usage(path: Path, *, stop_above: int | None = None) -> int:
    """Bytes allocated under path (links not followed, a hard-linked inode once); the walk
    ends early once the count is above stop_above. TooDeep past MAX_DEPTH levels."""
    linked: set[tuple[int, int]] = set()  # only inodes with several names: memory stays small
    total = 0
    try:
        root = os.open(path, _DIR_FLAGS)
    except OSError:
        return 0
    # one open directory (and its listing) per level: fds held = depth, never breadth
    stack = [(root, os.scandir(root))]
    try:
        while stack:
            fd, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                entries.close()
                os.close(fd)
                continue
            with contextlib.suppress(OSError):  # gone, or swapped for a link meanwhile
                info = entry.stat(follow_symlinks=False)
                if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
                    if (info.st_dev, info.st_ino) in linked:
                        continue
                    linked.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
                if stop_above is not None and total > stop_above:
                    break
                if stat.S_ISDIR(info.st_mode):
                    if len(stack) >= MAX_DEPTH:
                        raise TooDeep(f"nested deeper than {MAX_DEPTH} levels")
                    child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                    stack.append((child, os.scandir(child)))
    finally:
        for fd, entries in stack:
            entries.close()
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
        try:
            used = disk_usage(self.job_dir, stop_above=self.limit)
        except TooDeep as err:
            self.over = f"run dir over quota ({err})"
            return self.over
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
