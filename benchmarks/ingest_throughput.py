"""Ingest throughput (points/s committed) on SQLite and PostgreSQL, with a same-run baseline.

    python -m benchmarks.ingest_throughput [--points 400000]

Baseline: SQLAlchemy Core executemany of plain INSERTs (no duplicate handling).
Store: the ingest's idempotent bulk path alone (PostgreSQL: binary COPY straight into the
table, ON CONFLICT only after a unique violation; SQLite: INSERT OR IGNORE).
Ingest: the whole path from Redis entries (500-point batches) to commit, XACK and live append,
pipelined as the ingest runs (`Ingest.drain`: a round is read and validated while the previous
one commits).
Each path's CPU time is reported per point: this process's (all its threads) and, on
PostgreSQL, the server backends' of the benchmark database (/proc/<pid>/stat, so the
server must run on this host). Redis is a redis-server of the run's own on a free port
(`redis-server` must be on PATH).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import redis
import sqlalchemy as sa

from backend.db import Database
from backend.migrate import upgrade
from backend.telemetry.ingest.consumer import Ingest
from backend.telemetry.ingest.store import insert_metric_points
from backend.telemetry.models import MetricPoint
from benchmarks.own_redis import own_redis
from tests.telemetry.helpers import add_attempt
from workers.contract.protocol import BATCH_FIELD, METRICS_STREAM

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


@dataclass(frozen=True)
class Rate:
    """Points/s of one path, and the CPU seconds it took here and in the server's backends."""

    points_per_s: float
    cpu: float
    server_cpu: float | None


def server_cpu(db: Database) -> float | None:
    """CPU seconds the database's server backends have used (PostgreSQL on this host)."""
    if db.engine.dialect.name != "postgresql":
        return None
    with db.engine.connect() as conn:
        query = "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        pids = conn.execute(sa.text(query)).scalars().all()
    ticks = 0
    for pid in pids:
        try:  # utime and stime, after the command name (which may hold spaces)
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # a backend that has gone, or a server elsewhere
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def timed(db: Database, run: Callable[[], None], count: int) -> Rate:
    server = server_cpu(db)
    cpu = time.process_time()
    started = time.perf_counter()
    run()
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    after = server_cpu(db)
    used = None if server is None or after is None else after - server
    return Rate(count / wall, cpu, used)


def bench(url: str, redis_url: str, count: int) -> dict[str, Rate]:
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

    results["baseline executemany"] = timed(db, baseline, count)
    results["store (idempotent bulk)"] = timed(db, store, count)
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

    results["ingest (Redis → commit → ack)"] = timed(db, drain, count)
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
                base = results["baseline executemany"].points_per_s
                print(f"\n{label}, {count:,} points, load average {os.getloadavg()[0]:.2f}")
                for what, rate in results.items():
                    used = f"{rate.cpu / count * 1e6:.2f} µs/point here"
                    if rate.server_cpu is not None:
                        used += f", {rate.server_cpu / count * 1e6:.2f} in the server"
                    print(
                        f"  {what:32s} {rate.points_per_s:>10,.0f} points/s"
                        f"  ({rate.points_per_s / base:.2f}x baseline; CPU {used})"
                    )
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


if __name__ == "__main__":
    main()
