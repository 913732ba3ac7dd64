"""Ingest throughput (points/s committed) on SQLite and PostgreSQL, with a same-run baseline.

    python -m benchmarks.ingest_throughput [--points 400000]

Baseline: SQLAlchemy Core executemany of plain INSERTs (no duplicate handling).
Store: the ingest's idempotent bulk path alone (PostgreSQL: binary COPY straight into the
table, ON CONFLICT only after a unique violation; SQLite: INSERT OR IGNORE).
Ingest: the whole path from Redis entries (500-point batches) to commit, XACK and live append,
pipelined as the ingest runs (`Ingest.drain`: a round is read and validated while the previous
one commits).
Redis is a redis-server of the run's own on a free port (`redis-server` must be on PATH).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import redis
import sqlalchemy as sa

from backend.db import Database
from backend.migrate import upgrade
from backend.telemetry.ingest import Ingest
from backend.telemetry.models import MetricPoint
from backend.telemetry.store import insert_metric_points
from benchmarks.own_redis import own_redis
from tests.telemetry.helpers import add_attempt
from workers.protocol import BATCH_FIELD, METRICS_STREAM

POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432"
CHUNK = 10_000


def points(attempt: int, count: int, offset: int = 0) -> list[dict[str, object]]:
    return [
        {
            "attempt_id": attempt,
            "rank": i % 8,
            "step": (offset + i) // 8,
            "name": "loss",
            "value": 1.0 / (i + 1),
            "time": 1.7e9 + i,
        }  # fmt: skip
        for i in range(count)
    ]


def timed(run: Callable[[], None], count: int) -> float:
    started = time.perf_counter()
    run()
    return count / (time.perf_counter() - started)


def bench(url: str, redis_url: str, count: int) -> dict[str, float]:
    upgrade(url)
    db = Database(url)
    results = {}
    _, attempt = add_attempt(db)

    def baseline() -> None:
        rows = points(attempt, count)
        for start in range(0, count, CHUNK):
            with db.session() as session:
                session.execute(sa.insert(MetricPoint), rows[start : start + CHUNK])

    def store() -> None:
        rows = points(attempt, count, offset=count * 8)
        for start in range(0, count, CHUNK):
            with db.session() as session:
                insert_metric_points(session, rows[start : start + CHUNK])

    results["baseline executemany"] = timed(baseline, count)
    results["store (idempotent bulk)"] = timed(store, count)
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    ingest = Ingest(db=db, client=client, consumer="bench")
    ingest.ensure_groups()
    rows = points(attempt, count, offset=count * 16)
    for seq, start in enumerate(range(0, count, 500)):
        batch = {"producer": "bench", "seq": seq, "items": rows[start : start + 500]}
        client.xadd(METRICS_STREAM, {BATCH_FIELD: json.dumps(batch)})

    def drain() -> None:
        assert ingest.drain() == count // 500

    results["ingest (Redis → commit → ack)"] = timed(drain, count)
    client.flushdb()
    db.dispose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=400_000)
    count = parser.parse_args().points
    name = f"tb_bench_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(f"{POSTGRES}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        with tempfile.TemporaryDirectory() as tmp, own_redis() as redis_url:
            for label, url in (
                ("SQLite (WAL)", f"sqlite:///{Path(tmp) / 'bench.db'}"),
                ("PostgreSQL", f"{POSTGRES}/{name}"),
            ):
                results = bench(url, redis_url, count)
                base = results["baseline executemany"]
                print(f"\n{label}, {count:,} points")
                for what, rate in results.items():
                    print(f"  {what:32s} {rate:>10,.0f} points/s  ({rate / base:.2f}x baseline)")
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


if __name__ == "__main__":
    main()
