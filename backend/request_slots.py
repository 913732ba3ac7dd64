"""A bound on HTTP requests in flight, below the database pool, so a burst cannot deadlock.

A request's `SessionDep` session takes its connection at its first query (`authenticate`,
in one thread-pool call), and gives it back only when the session closes, in a later
thread-pool call after the endpoint's own. Unbounded, a burst larger than the pool ends
with every connection held by a request waiting for a thread and every thread waiting for
a connection: the whole API, and the background loops that share the pool (ingest,
scheduler), stand still until the pool's checkout timeout fails them
(docs/benchmarks.md, "Control plane at scale").

So at most `REQUEST_SLOTS` HTTP requests are past this middleware at once, each holding
at most one connection at a time; the rest wait here, holding neither a thread nor a
connection. The pool has room for every slot plus the background loops, and the thread
pool has more threads than there are slots, so every admitted request finds both.
A slot is held until the response has been sent, streamed bodies included (their
generators read the database with a session of their own). A request takes its slot only
once its body is in (the middleware sits inside `BodyGuard`, which reads it whole first), so
clients that send their bodies slowly cannot hold the slots. Websockets are not counted:
their database reads are single thread calls that take and return a connection.
"""

from __future__ import annotations

import asyncio

import anyio.to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.db import POOL_CONNECTIONS

#: database connections kept for the background loops of one API process (ingest and its
#: commit thread, scheduler, relay, summaries, rollups, retention, sweeps, stragglers,
#: webhooks, health probes, websocket snapshots) - more than they hold at once
BACKGROUND_CONNECTIONS = 16
#: HTTP requests in flight at once in one API process
REQUEST_SLOTS = POOL_CONNECTIONS - BACKGROUND_CONNECTIONS


class RequestSlots:
    """ASGI middleware: HTTP requests wait for one of `slots` before they reach the app."""

    def __init__(self, app: ASGIApp, *, slots: int = REQUEST_SLOTS) -> None:
        if slots < 1:
            raise ValueError(f"request slots must be at least 1, not {slots}")
        self.app = app
        self.slots = slots
        self._semaphore: asyncio.Semaphore | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._semaphore is None:  # made on the server's loop, at the first request
            self._semaphore = asyncio.Semaphore(self.slots)
            ensure_threads(self.slots)
        async with self._semaphore:
            await self.app(scope, receive, send)


def ensure_threads(slots: int) -> None:
    """Give the thread pool that runs sync dependencies and endpoints more threads than there
    are slots: an admitted request then always finds a thread for its next call."""
    limiter = anyio.to_thread.current_default_thread_limiter()
    limiter.total_tokens = max(int(limiter.total_tokens), slots + 8)
