"""How a scheduler tick's cost grows with the queue: 1k, 10k and 100k queued jobs.

For each queue size and database (SQLite, and PostgreSQL in a scratch database of its
own, dropped after), the cluster of `benchmarks.scheduler` (1,000 nodes of 8 devices,
sharing on: half held by running jobs, 100 users with usage and quotas) and N queued
jobs; then three ticks of a real `Scheduler` (real Redis, real Celery publish):

1. the first pass, which places what fits, preempts, and numbers the whole queue;
2. the next pass, nothing having changed (every job waits: the steady cost of a queue);
3. one more, for its spread (`--profile`: under cProfile, the top functions by own time).

Wall and CPU seconds of this process per tick, and CPU µs per queued job: flat across
sizes means linear growth; a quadratic part shows as µs per job growing 10× per size.

    python -m benchmarks.scheduler_growth [--sizes 1000,10000,100000] [--postgres URL]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import tempfile
import time
from pathlib import Path

from benchmarks.own_redis import own_redis
from benchmarks.scheduler import scratch_postgres, seeded_scheduler


def measure(db_url: str, redis_url: str, jobs: int, nodes: int, profile: bool) -> list[str]:
    seeded = time.perf_counter()
    scheduler, database, client = seeded_scheduler(db_url, redis_url, jobs, nodes, True)
    lines = [f"  seeded in {time.perf_counter() - seeded:.0f} s"]
    for n in range(1, 4):
        profiler = cProfile.Profile() if profile and n == 3 else None
        wall, cpu = time.perf_counter(), time.process_time()
        if profiler:
            profiler.enable()
        placed = scheduler.tick()
        if profiler:
            profiler.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        lines.append(
            f"  tick {n}: {wall:7.2f} s wall, {cpu:7.2f} s CPU, "
            f"{1e6 * cpu / jobs:6.1f} CPU-µs per queued job, {len(placed)} placed; "
            f"load {os.getloadavg()[0]:.1f}"
        )
        if profiler:
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(12)
            lines.append(out.getvalue())
    client.flushdb()
    database.dispose()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument(
        "--postgres",
        default="postgresql+psycopg://postgres@127.0.0.1:5432",
        help="PostgreSQL server URL; a scratch database is created and dropped ('' to skip)",
    )
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument("--profile", action="store_true", help="cProfile the third tick")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"load average at start: {os.getloadavg()}")
    with own_redis() as redis_url:
        for jobs in sizes:
            if not args.skip_sqlite:
                with tempfile.TemporaryDirectory() as tmp:
                    url = f"sqlite:///{Path(tmp) / 'bench.db'}"
                    print(f"SQLite, {jobs:,} queued jobs, {args.nodes:,} nodes", flush=True)
                    print("\n".join(measure(url, redis_url, jobs, args.nodes, args.profile)))
            if args.postgres:
                with contextlib.ExitStack() as stack:
                    url = stack.enter_context(scratch_postgres(args.postgres))
                    print(f"PostgreSQL, {jobs:,} queued jobs, {args.nodes:,} nodes", flush=True)
                    print("\n".join(measure(url, redis_url, jobs, args.nodes, args.profile)))
            print(flush=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
