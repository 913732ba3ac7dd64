"""A burst of requests larger than the database pool is answered, not deadlocked (#34).

Unbounded, such a burst left every pool connection held by a request waiting for a thread
and every thread waiting for a connection, until the pool's 30-s checkout timeout failed
them all (docs/benchmarks.md, "Control plane at scale"). Served by a real uvicorn.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from backend.db import POOL_CONNECTIONS, POOL_TIMEOUT_SECONDS
from backend.request_slots import REQUEST_SLOTS
from tests.app_settings import ADMIN_TOKEN, api_settings
from tests.telemetry.helpers import LiveServer

BURST = 6 * POOL_CONNECTIONS


@pytest.fixture
def served(tmp_path: Path, sqlite_url: str, redis_url: str) -> Iterator[LiveServer]:
    """The app under uvicorn on a free port (its lifespan and background loops run)."""
    settings = api_settings(
        tmp_path, database_url=sqlite_url, redis_url=redis_url, hosts="127.0.0.1"
    )
    with LiveServer.running(settings) as server:
        yield server


async def burst(url: str, token: str, paths: list[str]) -> Counter[int]:
    """Send every request at once; count the answers' status codes (599: no answer)."""
    limits = httpx.Limits(max_connections=len(paths), max_keepalive_connections=0)
    timeout = httpx.Timeout(3 * POOL_TIMEOUT_SECONDS)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as client:

        async def one(path: str) -> int:
            try:
                return (await client.get(path, headers=headers)).status_code
            except httpx.HTTPError:
                return 599

        return Counter(await asyncio.gather(*(one(p) for p in paths)))


def test_a_burst_six_times_the_pool_is_answered_in_full(served: LiveServer) -> None:
    assert REQUEST_SLOTS < POOL_CONNECTIONS < BURST
    # endpoints that read the database after authenticating, each in its own thread call
    paths = ["/api/jobs", "/api/nodes", "/api/me", "/api/runs"] * (BURST // 4)
    answers = asyncio.run(burst(served.url, ADMIN_TOKEN, paths))
    assert answers == Counter({200: BURST})
    # and the API still answers at once afterwards (nothing left holding the pool)
    assert asyncio.run(burst(served.url, ADMIN_TOKEN, ["/api/nodes"])) == Counter({200: 1})


def test_clients_sending_their_bodies_slowly_hold_no_slot(served: LiveServer) -> None:
    """More half-sent request bodies than there are slots: the API still answers at once
    (a slot is taken only once the body is in)."""
    host, port = "127.0.0.1", int(served.url.rsplit(":", 1)[1])
    head = (
        f"POST /api/jobs HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {ADMIN_TOKEN}\r\nContent-Length: 1000\r\n\r\n{{"
    ).encode()
    stalled = []
    try:
        for _ in range(REQUEST_SLOTS + 8):
            connection = socket.create_connection((host, port), timeout=10)
            connection.sendall(head)  # and never the rest of the body
            stalled.append(connection)
        time.sleep(0.5)  # every one of them is in the server, waiting for its body
        answer = httpx.get(
            f"{served.url}/api/nodes",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=POOL_TIMEOUT_SECONDS / 3,
        )
        assert answer.status_code == 200
    finally:
        for connection in stalled:
            connection.close()
