"""Fixtures shared by every test: the real Redis and PostgreSQL already running here."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import shutil
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
import redis.utils

from backend.migrate import upgrade
from tests.postgres_pool import PostgresPool
from tests.workers.worker_helpers import PrivateRedis

# the test processes allocate far more than a server does (an app, a database, routes per
# test): a young-generation pass every 700 allocations ran thousands of times a worker;
# every 20,000 it runs a few hundred times (docs/benchmarks.md "Fast test loop")
gc.set_threshold(20_000, 10, 10)

# redis-py looks its own version up in the installed distributions for every new connection
# (~10 ms here: ~4 s of the fast suite's CPU); it cannot change while the tests run
redis.utils.get_lib_version = functools.cache(redis.utils.get_lib_version)

REDIS_BASE = os.environ.get("TRAINBOARD_TEST_REDIS", "redis://127.0.0.1:6379")
POSTGRES_BASE = os.environ.get(
    "TRAINBOARD_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432"
)
#: Redis databases 1-15 as five slots of three (never the default 0).
_SLOTS = 5


_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
#: this pytest-xdist worker's number (gwN), or 0 in a serial run
_WORKER_NUMBER = int(_WORKER[2:]) if _WORKER.startswith("gw") else 0


def _redis_slot() -> int:
    """This process's slot: by pid, so that two runs on one server (several people testing
    at once) rarely meet; a pytest-xdist worker gwN takes slot (controller pid + N), so the
    workers of one run never share a database (up to five workers)."""
    if _WORKER:
        return (os.getppid() + _WORKER_NUMBER) % _SLOTS
    return os.getpid() % _SLOTS


#: three Redis databases of this test process: the suite's, one no test uses any more
#: (started stacks get a Redis of their own: `trainboard up` refuses this password-less
#: one), the telemetry tests'. TRAINBOARD_TEST_REDIS_DB_BASE pins the first; worker gwN
#: then takes the three from base + 3N.
_PINNED = os.environ.get("TRAINBOARD_TEST_REDIS_DB_BASE")
_DB_BASE = int(_PINNED) + 3 * _WORKER_NUMBER if _PINNED else 1 + _redis_slot() * 3
TEST_REDIS_DB, STACK_REDIS_DB, TELEMETRY_REDIS_DB = _DB_BASE, _DB_BASE + 1, _DB_BASE + 2


def emptied(url: str) -> Iterator[str]:
    """Yield a Redis database's URL, flushing it before and after (a fixture's body)."""
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()
    client.close()


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A real Redis database, empty at the start of the test."""
    yield from emptied(f"{REDIS_BASE}/{TEST_REDIS_DB}")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite database file."""
    return f"sqlite:///{tmp_path / 'trainboard.db'}"


@pytest.fixture(scope="session")
def postgres_pool() -> Iterator[PostgresPool]:
    """This process's migrated PostgreSQL databases (see tests/postgres_pool.py)."""
    pool = PostgresPool(POSTGRES_BASE, _admin)
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def migrate(
    tmp_path_factory: pytest.TempPathFactory, postgres_pool: PostgresPool
) -> Callable[[str], None]:
    """Bring a database to the newest schema, as `backend.migrate.upgrade` does.

    A new SQLite file is a copy of one that ran every migration once this session, a new
    PostgreSQL database a copy (CREATE DATABASE ... TEMPLATE) of one that did: each run of
    the migrations costs ~0.4 s of CPU, and most tests want one. Each copy gets a deployment
    id of its own. A test that wants a migrated PostgreSQL database from the start takes
    `migrated_postgres_url` (cheaper still).
    """
    template = tmp_path_factory.mktemp("schema") / "head.db"
    upgrade(f"sqlite:///{template}")

    def to_head(url: str) -> None:
        path = Path(url.removeprefix("sqlite:///"))
        if url.startswith("sqlite:///") and not path.exists():
            shutil.copyfile(template, path)
            with contextlib.closing(sqlite3.connect(path)) as db, db:
                db.execute("UPDATE deployment SET id = ?", (uuid.uuid4().hex,))
        elif postgres_pool.made(url):
            return  # migrated when the pool copied it, emptied when it was taken
        elif url.startswith(POSTGRES_BASE + "/") and _is_empty(url):
            _clone_postgres(url, postgres_pool)
        else:
            upgrade(url)

    return to_head


def _is_empty(url: str) -> bool:
    """Whether the database at url has no table (a database just made for the test)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        return not sa.inspect(engine).get_table_names()
    finally:
        engine.dispose()


def _clone_postgres(url: str, pool: PostgresPool) -> None:
    """Make the (empty) database at url anew as a copy of the pool's migrated template."""
    database = url.rsplit("/", 1)[1]
    # kept where the test put it (a tablespace on a small filesystem, say)
    space = _admin(
        "SELECT t.spcname FROM pg_database d JOIN pg_tablespace t ON t.oid = d.dattablespace "
        f"WHERE d.datname = '{database}'"
    )
    _admin(f'DROP DATABASE "{database}" WITH (FORCE)')
    pool.copy_template(database, str(space))


def _admin(statement: str) -> object:
    """Run one statement on the server's postgres database; its first value, if any."""
    import sqlalchemy as sa

    admin = sa.create_engine(f"{POSTGRES_BASE}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        result = connection.execute(sa.text(statement))
        value = result.scalar() if result.returns_rows else None
    admin.dispose()
    return value


def _drop_postgres(name: str) -> None:
    _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database on the real server, dropped afterwards."""
    name = f"tb_test_{uuid.uuid4().hex[:12]}"
    _admin(f'CREATE DATABASE "{name}"')
    yield f"{POSTGRES_BASE}/{name}"
    _drop_postgres(name)


@pytest.fixture
def migrated_postgres_url(postgres_pool: PostgresPool) -> Iterator[str]:
    """A PostgreSQL database at the newest schema holding only what the migrations wrote
    (kept for the next test afterwards, emptied then: see tests/postgres_pool.py)."""
    url = postgres_pool.take()
    yield url
    postgres_pool.give_back(url)


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One real Trainboard (`trainboard up`, 4 CPU slots) shared by the integration tests."""
    from tests.stack import password_redis, trainboard_up

    # a redis-server of the session's own that requires a password: `up` refuses the host's
    # open one (ranks could use it), and this also exercises the production shape
    tmp = tmp_path_factory.mktemp("stack")
    with password_redis(tmp) as redis_url, trainboard_up(tmp, redis_url) as running:
        yield running


@pytest.fixture
def private_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRedis]:
    """A real redis-server on a unix socket that the test may stop and start again."""
    server = PrivateRedis(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()
