"""An ingest consumer that freezes mid-batch (rows written, nothing committed) until it is killed.

Run as `python -m tests.telemetry.ingest_victim DB_URL REDIS_URL MARKER`.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import redis

from backend.db import Database
from backend.telemetry.ingest import consumer as ingest
from backend.telemetry.ingest import writer
from backend.telemetry.ingest.consumer import Ingest


def main(db_url: str, redis_url: str, marker: str) -> None:
    """Consume once; freeze inside the transaction after the inserts."""

    def write_then_freeze(session: Any, items: Any, **options: Any) -> Any:
        result = writer.write_batch(session, items, **options)
        session.flush()
        Path(marker).write_text("mid-batch")
        threading.Event().wait()  # killed here, before commit and before XACK
        return result

    ingest.write_batch = write_then_freeze
    consumer = Ingest(
        db=Database(db_url), client=redis.Redis.from_url(redis_url), consumer="victim"
    )
    consumer.consume(block_ms=5000)
    time.sleep(60)


if __name__ == "__main__":
    main(*sys.argv[1:4])
