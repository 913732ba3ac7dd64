"""Executors: how an attempt runs (the node pool of `trainboard worker`s, Slurm).

`backend.executors.base.Executor` is the boundary; `make_executor` picks the one the
operator configured (TRAINBOARD_EXECUTOR).
"""

from __future__ import annotations

import redis

from backend.config import Settings
from backend.executors.base import Executor


def make_executor(settings: Settings, client: redis.Redis) -> Executor:
    """The executor the settings name, ready to run attempts."""
    if settings.executor == "slurm":
        from backend.executors.slurm.cli import SlurmCli  # noqa: PLC0415
        from backend.executors.slurm.executor import SlurmExecutor  # noqa: PLC0415

        host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
        return SlurmExecutor(
            client=client,
            cli=SlurmCli(),
            data_dir=settings.data_dir,
            api_url=settings.slurm_api_url or f"http://{host}:{settings.port}",
            partition=settings.slurm_partition,
            gpus=settings.slurm_gpus,
        )
    from backend.executors.nodes import NodePool  # noqa: PLC0415 (only the chosen one loads)
    from workers.node.celery_app import make_celery  # noqa: PLC0415

    return NodePool(
        client=client,
        celery=make_celery(settings.redis_url),
        heartbeat_timeout=settings.heartbeat_timeout,
        claim_timeout=settings.claim_timeout,
    )
