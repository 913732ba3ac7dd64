"""SQLite: the ingest's commits leave the log's checkpoints to a thread of their own."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from backend.db import Database
from backend.deployment_keys import keys_of
from backend.telemetry.ingest.consumer import Ingest
from backend.telemetry.ingest.wal import WalCheckpoints
from tests.telemetry.helpers import add_attempt, count_points, point
from tests.telemetry.test_ingest import add_batch
from tests.workers.worker_helpers import wait_for
from workers.contract.protocol import METRICS_STREAM


@pytest.fixture
def sqlite_db(sqlite_url: str, migrate: Callable[[str], None]) -> Iterator[Database]:
    migrate(sqlite_url)
    db = Database(sqlite_url)
    yield db
    db.dispose()


def file_of(db: Database) -> Path:
    return Path(str(db.engine.url.database))


def test_an_owned_connections_commits_stay_in_the_log_until_the_thread_checkpoints(
    sqlite_db: Database,
) -> None:
    stopped = WalCheckpoints(sqlite_db.engine)
    stopped.close()  # nothing checkpoints for the connection it owns
    size = file_of(sqlite_db).stat().st_size
    with sqlite_db.engine.begin() as connection:
        stopped.own(connection)
        assert connection.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 0
        connection.exec_driver_sql("CREATE TABLE filler (data BLOB)")
        for _ in range(100):  # 6 MB: past the 1,000 pages at which a commit checkpoints
            connection.exec_driver_sql("INSERT INTO filler VALUES (randomblob(60000))")
    assert file_of(sqlite_db).stat().st_size == size  # all of it still in the log
    running = WalCheckpoints(sqlite_db.engine)
    try:
        with sqlite_db.engine.begin() as connection:
            running.own(connection)
        wait_for(lambda: file_of(sqlite_db).stat().st_size > size + 5_000_000, what="checkpoint")
    finally:
        running.close()


def test_the_running_ingest_checkpoints_what_it_commits(
    sqlite_db: Database, redis_url: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    _, attempt_id = add_attempt(sqlite_db)
    size = file_of(sqlite_db).stat().st_size
    ingest = Ingest(db=sqlite_db, client=client, consumer="wal")
    ingest.ensure_groups()
    stop = threading.Event()
    thread = threading.Thread(target=ingest.run, args=(stop,))
    thread.start()
    try:
        stream = keys_of(client).streams()[METRICS_STREAM]
        add_batch(client, stream, [point(attempt_id, step) for step in range(20_000)])
        wait_for(lambda: count_points(sqlite_db) == 20_000, what="points stored")
        wait_for(lambda: file_of(sqlite_db).stat().st_size > size, what="checkpoint")
    finally:
        stop.set()
        thread.join(30)
        client.close()
    assert not thread.is_alive()
