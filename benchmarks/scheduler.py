"""Scheduler throughput: decisions per second for 10,000 queued jobs on 1,000 simulated nodes.

Measures, in one run: (1) the pure placement policy, against a naive first-fit policy
(no priorities, no reservations) as the baseline ratio; (2) a full scheduler tick on a
real database (SQLite and PostgreSQL) with real Redis and Celery: read the queue and
the cluster, place, write attempts and slices, publish the tasks.

    python -m benchmarks.scheduler [--jobs 10000] [--nodes 1000] [--postgres URL] [--redis URL]

Redis: a redis-server of the run's own on a free port (`redis-server` on PATH) unless
`--redis` names one (the tick flushes its database).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import redis
import sqlalchemy as sa

from backend.auth.models import User
from backend.db import Database
from backend.jobs.models import Job
from backend.migrate import upgrade
from backend.nodes.models import Device, Node
from backend.scheduler.loop import Scheduler
from backend.scheduler.policy import NodeCapacity, Placement, Plan, QueuedJob, plan
from benchmarks.own_redis import own_redis
from workers.node.celery_app import make_celery

SIZES = (1, 1, 2, 4, 8)


def first_fit(queue: list[QueuedJob], nodes: list[NodeCapacity]) -> Plan:
    """The baseline: submission order, first node with room, no reservations."""
    free = {n.name: list(n.free) for n in nodes}
    result = Plan()
    for job in sorted(queue, key=lambda j: j.order):
        for node in nodes:
            if len(free[node.name]) >= job.devices:
                taken, free[node.name] = (
                    free[node.name][: job.devices],
                    free[node.name][job.devices :],
                )
                result.placements.append(Placement(job.id, ((node.name, tuple(taken)),)))
                break
    return result


def policy_rates(jobs: int, nodes: int) -> tuple[float, float]:
    rng = random.Random(0)
    cluster = [
        NodeCapacity(f"n{i}", 8, tuple(d for d in range(8) if rng.random() < 0.5))
        for i in range(nodes)
    ]
    queue = [
        QueuedJob(i, rng.choice(SIZES), priority=rng.randint(0, 2), order=i) for i in range(jobs)
    ]
    rates = []
    for policy in (plan, first_fit):
        start = time.perf_counter()
        policy(queue, cluster)
        rates.append(jobs / (time.perf_counter() - start))
    return rates[0], rates[1]


def tick_rate(db_url: str, redis_url: str, jobs: int, nodes: int) -> tuple[float, int]:
    """Decisions per second of one full scheduler tick over the whole queue."""
    upgrade(db_url)
    database = Database(db_url)
    rng = random.Random(0)
    with database.session() as session:
        owner = User(username="bench", role="user")
        session.add(owner)
        session.flush()
        for i in range(nodes):
            node = Node(name=f"n{i}", hostname="h", address="127.0.0.1")
            node.devices = [Device(index=d, kind="cpu", name=f"CPU slot {d}") for d in range(8)]
            session.add(node)
        for i in range(jobs):
            size = rng.choice(SIZES)
            spec = {
                "name": f"j{i}",
                "template": "mlp",
                "parallelism": {"strategy": "data", "devices": size},
            }
            session.add(
                Job(
                    name=f"j{i}",
                    owner_id=owner.id,
                    spec=spec,
                    devices_requested=size,
                    priority_rank=rng.randint(0, 2),
                )
            )
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    scheduler = Scheduler(
        db=database,
        client=client,
        celery=make_celery(redis_url),
        interval=1,
        heartbeat_timeout=3600,
    )
    start = time.perf_counter()
    placed = scheduler.tick()
    elapsed = time.perf_counter() - start
    client.flushdb()
    database.dispose()
    return jobs / elapsed, len(placed)


@contextlib.contextmanager
def scratch_postgres(server: str) -> Iterator[str]:
    """A fresh database on the server, dropped afterwards."""
    name = f"tb_bench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"{server}/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument(
        "--redis", default="", help="Redis URL (default: a redis-server of the run's own)"
    )
    parser.add_argument(
        "--postgres",
        default="postgresql+psycopg://postgres@127.0.0.1:5432",
        help="PostgreSQL server URL; a scratch database is created and dropped ('' to skip)",
    )
    args = parser.parse_args()
    ours, naive = policy_rates(args.jobs, args.nodes)
    print(f"policy: {ours:,.0f} decisions/s; first-fit baseline {naive:,.0f}/s")
    print(f"policy / first-fit ratio: {ours / naive:.2f}")
    with contextlib.ExitStack() as stack:
        redis_url = args.redis or stack.enter_context(own_redis())
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        rate, placed = tick_rate(
            f"sqlite:///{Path(tmp) / 'bench.db'}", redis_url, args.jobs, args.nodes
        )
        print(f"full tick, SQLite: {rate:,.0f} decisions/s ({placed} placed)")
        if args.postgres:
            with scratch_postgres(args.postgres) as url:
                rate, placed = tick_rate(url, redis_url, args.jobs, args.nodes)
            print(f"full tick, PostgreSQL: {rate:,.0f} decisions/s ({placed} placed)")


if __name__ == "__main__":
    main()
