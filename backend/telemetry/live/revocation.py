"""Open websockets end when their credential does: one query per tick for every connection.

A token can be revoked by any API process (logout, a password reset, `DELETE /api/tokens`,
the CLI writing the database directly), so each process asks the database, not a message
bus: every `TICK` seconds it reads the tokens its open websockets hold, and closes those
whose token is revoked, expired or gone. The cost does not grow with the connections.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable

from sqlalchemy import select

from backend.auth.models import ApiToken
from backend.db import Database, as_utc, utcnow

log = logging.getLogger(__name__)

#: seconds between checks: a revoked token's websockets close within about this long
TICK = 0.25
_CHUNK = 500

Closer = Callable[[], Awaitable[None]]


class SessionWatch:
    """Tracks which token each open websocket holds and closes it once that token is dead."""

    def __init__(self, db: Database, tick: float = TICK) -> None:
        self.db, self.tick = db, tick
        self.held: dict[int, set[Closer]] = defaultdict(set)
        #: set once a connection is watched: with none open the loop sleeps instead of ticking
        self._watching = asyncio.Event()

    def add(self, token_id: int, closer: Closer) -> None:
        """Watch a connection authenticated by token_id; closer ends it."""
        self.held[token_id].add(closer)
        self._watching.set()

    def discard(self, token_id: int, closer: Closer) -> None:
        """Stop watching a connection (it ended)."""
        closers = self.held.get(token_id)
        if closers is not None:
            closers.discard(closer)
            if not closers:
                del self.held[token_id]

    async def run(self) -> None:
        """Check every tick until cancelled; a failed check is logged and retried."""
        while True:
            if not self.held:
                self._watching.clear()
                await self._watching.wait()
            await asyncio.sleep(self.tick)
            if not self.held:
                continue
            try:
                dead = await asyncio.to_thread(self.dead_tokens, list(self.held))
            except Exception:
                log.exception("websocket credential check failed")
                continue
            for token_id in dead:
                for closer in self.held.pop(token_id, set()):
                    await closer()

    def dead_tokens(self, token_ids: Iterable[int]) -> set[int]:
        """The ids among token_ids that are revoked, expired or no longer exist."""
        wanted = list(token_ids)
        alive: set[int] = set()
        now = utcnow()
        with self.db.session() as session:
            for start in range(0, len(wanted), _CHUNK):
                rows = session.execute(
                    select(ApiToken.id, ApiToken.revoked_at, ApiToken.expires_at).where(
                        ApiToken.id.in_(wanted[start : start + _CHUNK])
                    )
                )
                for token_id, revoked_at, expires_at in rows:
                    if revoked_at is None and (expires_at is None or as_utc(expires_at) > now):
                        alive.add(token_id)
        return set(wanted) - alive
