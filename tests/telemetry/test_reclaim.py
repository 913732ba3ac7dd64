"""An ingest consumer killed mid-batch loses nothing: another consumer reclaims its entries."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from backend.db import Database
from backend.telemetry.ingest.consumer import Ingest
from backend.telemetry.ingest.streams import backlog
from tests.telemetry.helpers import count_points, point, stored_steps, wait_for
from workers.contract.protocol import BATCH_FIELD, INGEST_GROUP, METRICS_STREAM

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a consumer in a child process, killed mid-batch
def test_a_consumer_killed_mid_batch_loses_nothing(
    database: Database,
    db_url: str,
    redis_url: str,
    tmp_path: Path,
    new_attempt: Callable[..., tuple[int, int]],
) -> None:
    _, attempt = new_attempt()
    client = redis.Redis.from_url(redis_url)
    survivor = Ingest(db=database, client=client, consumer="survivor", reclaim_idle_ms=200)
    survivor.ensure_groups()
    for seq in range(3):
        items = [point(attempt, seq * 200 + i) for i in range(200)]
        client.xadd(
            METRICS_STREAM, {BATCH_FIELD: json.dumps({"producer": "p", "seq": seq, "items": items})}
        )

    marker = tmp_path / "frozen"
    victim = subprocess.Popen(
        [sys.executable, "-m", "tests.telemetry.ingest_victim", db_url, redis_url, str(marker)],
        cwd=ROOT,
    )
    try:
        wait_for(marker.exists, timeout=60, what="the victim to freeze mid-batch")
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()
    assert client.xpending(METRICS_STREAM, INGEST_GROUP)["pending"] == 3  # read, never acked
    assert survivor.consume() == 0  # delivered to the victim: not for new readers

    wait_for(survivor.reclaim, timeout=10, what="the victim's entries to be reclaimed")
    assert count_points(database) == 600
    assert stored_steps(database, attempt) == list(range(600))
    assert backlog(client, METRICS_STREAM).pending == 0
