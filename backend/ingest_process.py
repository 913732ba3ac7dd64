"""The telemetry ingest and the loops that follow what it stores, in whichever process runs
them: the API's (`run_ingest`, on by default) or a process of their own (`trainboard
ingest`, which `trainboard up` starts, with the API's `run_ingest` off).

Apart from the API, the ingest's rounds do not hold the API's GIL while its live tail and
websockets deliver the deltas they commit (`docs/benchmarks.md`, "Live delivery"): nothing
passes between them but Redis (the ingest appends to `tb:live` and announces jobs; every
API process tails the one and relays the other).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from typing import Any

import redis

from backend.background import News, named_client, start_loops, stop_loops
from backend.config import Settings
from backend.db import Database
from backend.deployment_keys import attach
from backend.health.stragglers import run_stragglers
from backend.migrate import upgrade
from backend.nodes.deployment import deployment_id
from backend.sweeps.loop import judge_moved
from backend.telemetry.ingest.consumer import Ingest, consumer_name
from backend.telemetry.live.relay import relay_announcements
from backend.telemetry.series.cache import SeriesCache
from backend.telemetry.series.retention import run_retention
from backend.telemetry.series.rollup_builder import run_rollups
from backend.telemetry.series.summaries import run_summaries
from backend.webhooks.delivery import run_webhooks
from backend.webhooks.destination import AllowList
from workers.contract.heap import settle_heap
from workers.contract.keys import Keys

log = logging.getLogger(__name__)

Loop = tuple[str, Callable[[], None]]


def ingest_loops(
    settings: Settings, db: Database, client: redis.Redis, stop: threading.Event, news: News
) -> list[Loop]:
    """The ingest, and the loops that work on what it stores (retention, rollups, summaries,
    stragglers, webhooks); `news` must hear every job announcement."""
    cap = settings.log_lines_per_attempt
    ingest = Ingest(
        db=db,
        client=client,
        consumer=consumer_name(),
        log_lines_per_attempt=cap,
        on_progress=lambda job_ids: judge_moved(db, client, job_ids),
    )
    hours, bucket = settings.device_raw_retention_hours, settings.device_rollup_seconds
    grace = settings.curve_rollup_grace_seconds
    # its own cache: it reads the series that change, which the pages' cache holds too
    summary_cache = SeriesCache(settings.series_cache_points // 4)
    told, hooks_news = news.listen(), news.listen()
    allow = AllowList.parse(settings.webhook_allowed_hosts)
    return [
        ("ingest", lambda: ingest.run(stop)),
        (
            "retention",
            lambda: run_retention(db=db, retention_hours=hours, bucket=bucket, stop=stop),
        ),
        ("rollups", lambda: run_rollups(db=db, grace=grace, stop=stop)),
        ("summaries", lambda: run_summaries(db=db, cache=summary_cache, stop=stop, news=told)),
        ("stragglers", lambda: run_stragglers(db=db, client=client, stop=stop)),
        ("webhooks", lambda: run_webhooks(db=db, stop=stop, allow=allow, news=hooks_news)),
    ]


def run_ingest_process(settings: Settings) -> int:
    """Run the ingest and its loops until SIGTERM or SIGINT (`trainboard ingest`)."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    stop, news = threading.Event(), News()

    def on_signal(_signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if settings.auto_migrate:
        upgrade(settings.db_url)
    db = Database(settings.db_url)
    client = named_client(settings.redis_url)
    try:
        with db.session() as session:
            attach(client, Keys(deployment_id(session)))  # the API's deployment's streams
        # no websocket clients here: the relay only tells this process's loops of job news
        hear = ("news", lambda: relay_announcements(db=db, client=client, stop=stop, news=news))
        threads = start_loops([hear, *ingest_loops(settings, db, client, stop, news)])
        settle_heap()  # start-up's objects out of the collector's full passes
        stop.wait()  # a signal's handler sets it (the wait is interrupted to run it)
        news.announce()  # the loops sleeping on news end at once
        stop_loops(threads, stop, client, timeout=5)
        return 0
    finally:
        client.close()
        db.dispose()
