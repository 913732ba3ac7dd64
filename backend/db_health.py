"""A database that cannot be written says so: 503 with the cause, health degraded, few logs.

SQLite answers "database or disk is full" and PostgreSQL DiskFull (SQLSTATE 53100) when
their disk is full; reads keep working meanwhile. A write refused that way is the
platform's condition, not a bug of the request: it gets a JSON 503 naming the cause, the
log gets one line per cause per minute (not a traceback per request), and `/api/health`
says degraded until a probe write succeeds again.
"""

from __future__ import annotations

import logging
import threading
import time

from fastapi import FastAPI, Request, status
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from starlette.responses import JSONResponse

from backend.db import Database

log = logging.getLogger(__name__)

DISK_FULL = "disk full"
LOG_EVERY_SECONDS = 60.0
_PG_DISK_FULL = "53100"
#: one committed write that needs new space: SQLite's commit grows its write-ahead log;
#: PostgreSQL may still update rows in pages it has, so the probe fills a new relation
#: (a temporary one, in the database's own tablespace, dropped at commit)
_PROBES = {
    "sqlite": "UPDATE deployment SET id = id",
    "postgresql": "CREATE TEMP TABLE trainboard_write_probe ON COMMIT DROP AS "
    "SELECT g FROM generate_series(1, 2000) AS g",
}


def cause_of(error: OperationalError) -> str:
    """What stops the database: "disk full", or the driver's first line."""
    original = error.orig
    if getattr(original, "sqlstate", None) == _PG_DISK_FULL:
        return DISK_FULL
    lines = str(original if original is not None else error).strip().splitlines()
    message = lines[0] if lines else ""
    if "database or disk is full" in message or "No space left on device" in message:
        return DISK_FULL
    return message[:200] or type(original).__name__


class WriteHealth:
    """Whether the database took the last write; the cause while it does not."""

    def __init__(self) -> None:
        self.cause: str | None = None
        self._logged: dict[str, float] = {}
        self._lock = threading.Lock()

    def failed(self, cause: str) -> None:
        """Record a refused write; log it once per cause per minute."""
        now = time.monotonic()
        with self._lock:
            self.cause = cause
            if now - self._logged.get(cause, -LOG_EVERY_SECONDS) < LOG_EVERY_SECONDS:
                return
            self._logged[cause] = now
        log.error("the database cannot be written: %s (requests get 503 until it can)", cause)

    def probe(self, db: Database) -> str | None:
        """While degraded, try one real write (committed); return the cause still standing."""
        if self.cause is None:
            return None
        try:
            with db.session() as session:
                session.execute(text(_PROBES[db.engine.dialect.name]))
        except OperationalError as error:
            self.failed(cause_of(error))
            return self.cause
        with self._lock:
            if self.cause is not None:
                log.warning("the database can be written again (was: %s)", self.cause)
            self.cause = None
        return None


async def unwritable(request: Request, exc: Exception) -> JSONResponse:
    """503 naming why the database refused, instead of a bare 500."""
    assert isinstance(exc, OperationalError)
    cause = cause_of(exc)
    health: WriteHealth = request.app.state.write_health
    health.failed(cause)
    detail = (
        f"the database cannot be written: {cause}"
        if cause == DISK_FULL
        else f"the database is unavailable: {cause}"
    )
    return JSONResponse({"detail": detail}, status_code=status.HTTP_503_SERVICE_UNAVAILABLE)


def install(app: FastAPI) -> None:
    """Answer OperationalError with 503 and keep the write health on app.state."""
    app.state.write_health = WriteHealth()
    app.add_exception_handler(OperationalError, unwritable)
