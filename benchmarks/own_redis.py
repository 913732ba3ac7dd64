"""A redis-server of a benchmark run's own, on a free port (`redis-server` must be on PATH).

Not a database of the shared server: test runs flush numbered databases of it
(tests/conftest.py), which stalls or empties a benchmark that shares one.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator

import redis

from tests.workers.worker_helpers import free_port, wait_for


@contextlib.contextmanager
def own_redis() -> Iterator[str]:
    """Start a redis-server (no persistence) on a free port; its URL, stopped afterwards."""
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        wait_for(lambda: _answers(url), timeout=10, what="redis-server to start")
        yield url
    finally:
        server.terminate()
        server.wait(10)


def _answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url).ping())
    except redis.ConnectionError:
        return False
