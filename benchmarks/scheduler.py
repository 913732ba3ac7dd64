"""Scheduler throughput: decisions per second for 10,000 queued jobs on 1,000 simulated nodes.

Measures, in one run: (1) the pure placement policy, against a naive first-fit policy
(no priorities, no reservations) as the baseline ratio; (2) a full scheduler tick on a
real database (SQLite and PostgreSQL) with real Redis and Celery: read the queue and
the cluster, place, write attempts and slices, publish the tasks.

Sharing is on unless `--no-sharing`: the jobs belong to 100 users with a week of past
usage (fair share), shares and quotas of their own, and half the cluster is held by
running low-priority jobs that queued high-priority ones preempt.

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
from datetime import timedelta
from pathlib import Path
from typing import Any

import redis
import sqlalchemy as sa
from sqlalchemy.orm import Session

from backend.auth.models import User
from backend.db import Database, utcnow
from backend.executors.nodes import NodePool
from backend.jobs.models import Attempt, AttemptSlice, Job
from backend.migrate import upgrade
from backend.nodes.models import Device, Node
from backend.placement.fairshare import fair_share_factors
from backend.placement.policy import NodeCapacity, Placement, Plan, QueuedJob, Quota, plan
from backend.placement.preemption import RunningJob
from backend.scheduler.loop import Scheduler
from backend.usage.models import UserLimits
from benchmarks.own_redis import own_redis
from workers.node.celery_app import make_celery

SIZES = (1, 1, 2, 4, 8)
USERS = 100


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


def policy_rates(jobs: int, nodes: int, sharing: bool) -> tuple[float, float, int]:
    """Decisions/s of the policy and of first-fit, and how many jobs the policy preempted."""
    rng = random.Random(0)
    cluster: list[NodeCapacity] = []
    running: list[RunningJob] = []
    for i in range(nodes):
        busy = [d for d in range(8) if rng.random() < 0.5]
        cluster.append(NodeCapacity(f"n{i}", 8, tuple(d for d in range(8) if d not in busy)))
        if sharing:  # the busy devices: running low-priority jobs, one per 2 devices
            running += [
                RunningJob(len(running) + jobs, 2, ((f"n{i}", len(busy[k : k + 2])),), k)
                for k in range(0, len(busy), 2)
            ]
    factors = fair_share_factors(
        usage={u: rng.random() * 1e6 for u in range(USERS)}, shares={u: 1.0 for u in range(USERS)}
    )
    queue = [
        QueuedJob(
            i,
            rng.choice(SIZES),
            priority=rng.randint(0, 2),
            order=i,
            owner=i % USERS,
            fair_share=factors[i % USERS] if sharing else 1.0,
        )
        for i in range(jobs)
    ]
    quotas = {u: Quota(max_devices=16) for u in range(0, USERS, 10)} if sharing else None
    start = time.perf_counter()
    ours = plan(queue, cluster, running=running, quotas=quotas)
    rate = jobs / (time.perf_counter() - start)
    start = time.perf_counter()
    first_fit(queue, cluster)
    return rate, jobs / (time.perf_counter() - start), len(ours.preemptions)


def _job(name: str, owner: User, size: int, **fields: Any) -> Job:
    """A job row of `owner` whose mlp spec asks for `size` data-parallel devices."""
    spec = {"name": name, "template": "mlp", "parallelism": {"strategy": "data", "devices": size}}
    return Job(name=name, owner_id=owner.id, spec=spec, devices_requested=size, **fields)


def _shared_cluster(session: Session, users: list[User], nodes: int, rng: random.Random) -> None:
    """Past usage and limits per user; half the nodes held by running low-priority jobs."""
    now = utcnow()
    for k, user in enumerate(users):
        session.add(
            UserLimits(  # every 10th user has quotas: 16 devices at once, 500 device-hours
                user_id=user.id,
                share=1.0 + k % 3,
                max_devices=None if k % 10 else 16,
                max_device_hours=None if k % 10 else 500.0,
            )
        )
        past = _job("past", user, 8, state="succeeded")
        session.add(past)
        session.flush()
        hours = rng.uniform(0, 48)
        session.add(
            Attempt(
                job_id=past.id,
                number=1,
                node_name="n0",
                devices=list(range(8)),
                state="succeeded",
                master_port=0,
                owner_id=user.id,
                device_count=8,
                claimed_at=now - timedelta(days=1, hours=hours),
                finished_at=now - timedelta(days=1),
            )
        )
    for i in range(0, nodes, 2):
        for pair in ((0, 1), (2, 3), (4, 5), (6, 7)):
            owner = users[rng.randrange(len(users))]
            job = _job("running", owner, 2, state="running", priority_rank=2, attempt=1)
            session.add(job)
            session.flush()
            attempt = Attempt(
                job_id=job.id,
                number=1,
                node_name=f"n{i}",
                devices=list(pair),
                state="running",
                master_port=0,
                owner_id=owner.id,
                device_count=2,
                claimed_at=now - timedelta(minutes=rng.uniform(10, 600)),
            )
            session.add(attempt)
            session.flush()
            session.add(
                AttemptSlice(
                    attempt_id=attempt.id,
                    node_name=f"n{i}",
                    node_rank=0,
                    devices=list(pair),
                    state="running",
                )
            )


def tick_rate(
    db_url: str, redis_url: str, jobs: int, nodes: int, sharing: bool
) -> tuple[float, int, int]:
    """Decisions per second of one full scheduler tick over the whole queue; placed; preempted."""
    scheduler, database, client = seeded_scheduler(db_url, redis_url, jobs, nodes, sharing)
    start, cpu = time.perf_counter(), time.process_time()
    placed = scheduler.tick()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    own = f"{cpu:.1f} s CPU of this process ({jobs / cpu:,.0f}/CPU-s)"
    print(f"  tick: {elapsed:.1f} s wall, {own}")
    client.flushdb()
    with database.session() as session:
        preempted = session.scalar(
            sa.select(sa.func.count()).select_from(Job).where(Job.stop_request == "preempt")
        )
    database.dispose()
    return jobs / elapsed, len(placed), int(preempted or 0)


def seeded_scheduler(
    db_url: str, redis_url: str, jobs: int, nodes: int, sharing: bool
) -> tuple[Scheduler, Database, redis.Redis]:
    """A scheduler on a migrated database holding the cluster and `jobs` queued jobs; no
    worker claims what it places, and no claim times out (a long pass would withdraw them)."""
    upgrade(db_url)
    database = Database(db_url)
    rng = random.Random(0)
    with database.session() as session:
        users = [User(username=f"bench{u}", role="user") for u in range(USERS if sharing else 1)]
        session.add_all(users)
        session.flush()
        for i in range(nodes):
            node = Node(name=f"n{i}", hostname="h", address="127.0.0.1")
            node.devices = [Device(index=d, kind="cpu", name=f"CPU slot {d}") for d in range(8)]
            session.add(node)
        if sharing:
            _shared_cluster(session, users, nodes, rng)
        for i in range(jobs):
            size = rng.choice(SIZES)
            session.add(_job(f"j{i}", users[i % len(users)], size, priority_rank=rng.randint(0, 2)))
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    scheduler = Scheduler(
        db=database,
        client=client,
        interval=1,
        executor=NodePool(
            client=client,
            celery=make_celery(redis_url),
            heartbeat_timeout=3600,
            claim_timeout=3600,
        ),
    )
    return scheduler, database, client


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


def _report(database: str, rate: float, placed: int, preempted: int) -> None:
    counts = f"{placed} placed, {preempted} preempted"
    print(f"full tick, {database}: {rate:,.0f} decisions/s ({counts})")


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
    parser.add_argument(
        "--no-sharing", action="store_true", help="no users' usage, limits or running victims"
    )
    parser.add_argument("--skip-sqlite", action="store_true")
    args = parser.parse_args()
    sharing = not args.no_sharing
    ours, naive, victims = policy_rates(args.jobs, args.nodes, sharing)
    print(f"sharing (fair share, quotas, preemption): {'on' if sharing else 'off'}")
    print(f"policy: {ours:,.0f} decisions/s ({victims} preemptions); first-fit {naive:,.0f}/s")
    print(f"policy / first-fit ratio: {ours / naive:.2f}")
    with contextlib.ExitStack() as stack:
        redis_url = args.redis or stack.enter_context(own_redis())
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        urls = [] if args.skip_sqlite else [("SQLite", f"sqlite:///{Path(tmp) / 'bench.db'}")]
        for name, url in urls:
            rate, placed, preempted = tick_rate(url, redis_url, args.jobs, args.nodes, sharing)
            _report(name, rate, placed, preempted)
        if args.postgres:
            with scratch_postgres(args.postgres) as url:
                rate, placed, preempted = tick_rate(url, redis_url, args.jobs, args.nodes, sharing)
            _report("PostgreSQL", rate, placed, preempted)


if __name__ == "__main__":
    main()
