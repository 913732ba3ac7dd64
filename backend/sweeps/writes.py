"""One writer of sweeps' trials at a time, across the processes that share a SQLite database."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator

from sqlalchemy import URL


class SweepWrites:
    """A re-entrant lock that a sweep's writers take before any write: its creation (a
    request's thread) launching the first trials, the sweeps loop judging and launching, and
    the ingest judging trials as their points land. Each decides from what is committed; two
    launches at once submitted the same trial twice (the loop is woken at once by the first
    trial's announcement; tests/e2e/test_sweeps.py at load 15: the copy's rung entries moved
    ASHA's threshold), and two judges at once each wrote a rung's verdict (SQLite ignores FOR
    UPDATE). Re-entrant: the loop launches while it holds it. Taken before any write, so it
    never waits while holding SQLite's write lock.

    Between the threads of a process it is a lock; on a SQLite file it also holds an
    exclusive `flock` on `<database>-sweeps.lock` while held, because the ingest may judge in
    a process of its own (`trainboard ingest`, which `trainboard up` runs) while the API's
    loop and requests judge and launch. On PostgreSQL the sweep's row lock (FOR UPDATE SKIP
    LOCKED) keeps two processes' passes apart.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0  # changed only by the thread that holds _lock
        self._file: int | None = None

    @contextlib.contextmanager
    def held(self, database: URL) -> Iterator[None]:
        """Hold it for the database at that URL (its file lock only at the outermost hold)."""
        with self._lock:
            if self._depth == 0:
                self._file = _lock_file(database)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._file is not None:
                    os.close(self._file)  # the flock goes with the file's last descriptor
                    self._file = None


def _lock_file(database: URL) -> int | None:
    """An open descriptor holding `<database>-sweeps.lock` exclusively; None unless SQLite on
    a file."""
    if database.get_backend_name() != "sqlite" or database.database in (None, "", ":memory:"):
        return None
    path = f"{database.database}-sweeps.lock"
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


#: the one lock of this process
SWEEP_WRITES = SweepWrites()
