"""Keep the garbage collector's full passes short in long-running Trainboard processes.

A process that imported FastAPI, SQLAlchemy, Celery or torch holds hundreds of thousands
of long-lived objects; CPython's oldest-generation collection walks all of them, and on a
2-core machine that held the API's event loop and ingest for 70 - 110 ms at a time (seen
as the tail of publish → websocket latency, docs/benchmarks.md "Live delivery"). Once
start-up is done, those objects never become garbage: `gc.freeze()` moves them to the
permanent generation, so later full passes walk only what was allocated since.
"""

from __future__ import annotations

import gc


def settle_heap() -> None:
    """Collect start-up garbage once, then take every surviving object out of later passes."""
    gc.collect()
    gc.freeze()
