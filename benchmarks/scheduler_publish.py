"""The dispatch's Celery publish: 1,232 attempt orders (a 10k pass's placements) to real Redis.

`NodePool.start` as the scheduler calls it after a pass commits, against the same publish
with Celery's default argument repr (`saferepr` of each order, up to 1 KB, for its logs),
in alternating rounds; CPU seconds of this process per round.

    python -m benchmarks.scheduler_publish [--orders 1232] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis

from backend.executors.nodes import NodePool
from benchmarks.own_redis import own_redis
from workers.contract.protocol import AttemptOrder
from workers.contract.spec import JobSpec
from workers.node.celery_app import make_celery


@contextmanager
def default_repr(celery: Any) -> Iterator[None]:
    """Celery's own argsrepr: drop the one `start` passes."""
    send = celery.send_task

    def send_task(*args: Any, **options: Any) -> Any:
        options.pop("argsrepr", None)
        return send(*args, **options)

    celery.send_task = send_task
    try:
        yield
    finally:
        celery.send_task = send


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1_232)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    spec = JobSpec.model_validate(
        {"name": "j", "template": "mlp", "parallelism": {"strategy": "data", "devices": 2}}
    )
    orders = [
        AttemptOrder(
            attempt_id=i,
            job_id=i,
            number=1,
            node=f"n{i % 1000}",
            devices=[0, 1],
            node_rank=0,
            nnodes=1,
            master_addr="127.0.0.1",
            spec=spec,
            deployment="bench",
        )
        for i in range(args.orders)
    ]
    print(f"load average at start: {os.getloadavg()}")
    with own_redis() as url:
        client = redis.Redis.from_url(url)
        pool = NodePool(client=client, celery=make_celery(url), heartbeat_timeout=60)
        pool.start(orders[:10])  # connected, and the code paths warm
        cpu: dict[str, list[float]] = {"ours": [], "celery's repr": []}
        for _ in range(args.rounds):
            for name in cpu:
                client.flushdb()
                start = time.process_time()
                if name == "ours":
                    pool.start(orders)
                else:
                    with default_repr(pool.celery):
                        pool.start(orders)
                cpu[name].append(time.process_time() - start)
        client.close()
    for name, seconds in cpu.items():
        rounds = [round(s, 3) for s in seconds]
        print(f"{name}: CPU s per {args.orders} orders, each round: {rounds}")
    ratio = min(cpu["celery's repr"]) / min(cpu["ours"])
    print(f"best round, Celery's repr / ours: {ratio:.2f}")


if __name__ == "__main__":
    main()
