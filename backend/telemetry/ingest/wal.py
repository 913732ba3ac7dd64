"""SQLite: the ingest's commits leave the write-ahead log's checkpoints to a thread of their own.

SQLite checkpoints its log in the commit that takes it past 1,000 pages (`wal_autocheckpoint`):
at 4,000 points/s every second or so, an ingest commit also copied the log into the database
and synced both, and every point that came meanwhile waited for it (a round of 20 points:
commit p99 22 – 44 ms with it, 10 – 13 ms without, at load 11; docs/benchmarks.md, "Live
delivery", fourth session). The connections the ingest commits on do not checkpoint; this
thread does, PASSIVE (it never waits for a writer or a reader, nor blocks them), at most once
a `CHECKPOINT_SECONDS` while the ingest commits, and sleeps while it does not. Other
connections keep SQLite's own checkpoints. What a crash loses is unchanged: a commit is in the
log before it returns, checkpointed or not.
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

log = logging.getLogger(__name__)

CHECKPOINT_SECONDS = 1.0
#: marks a connection (its pool record's info) whose commits no longer checkpoint
_OFF = "trainboard_no_autocheckpoint"


def checkpoints_apart(engine: Engine) -> bool:
    """Whether this database's log can be checkpointed apart: SQLite on a file."""
    url = engine.url
    return url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:")


class WalCheckpoints:
    """The thread that checkpoints SQLite's log for the ingest's connections."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._due = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ingest-wal", daemon=True)
        self._thread.start()

    def own(self, connection: Connection) -> None:
        """Before the ingest commits on connection: its commits do not checkpoint; this does."""
        if not connection.info.get(_OFF):
            connection.exec_driver_sql("PRAGMA wal_autocheckpoint=0")
            connection.info[_OFF] = True
        self._due.set()

    def close(self) -> None:
        """Checkpoint once more, and stop."""
        self._stop.set()
        self._due.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._due.wait()  # an owned connection is about to commit
            self._stop.wait(CHECKPOINT_SECONDS)  # what commits meanwhile goes with it
            self._due.clear()
            self.checkpoint()

    def checkpoint(self) -> None:
        """Copy what the log holds into the database, as far as no reader needs it."""
        try:
            with self._engine.connect() as connection:
                connection.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")
        except SQLAlchemyError as err:  # the next one goes on from where this stopped
            log.warning("ingest: a WAL checkpoint failed: %s", err)
