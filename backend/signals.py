"""Best-effort Redis signals from the control plane: job changes and scheduler wake-ups.

The database is the truth; a lost signal only delays a browser update or a scheduling
pass until the next tick, so Redis errors are logged and never fail a request.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence

import redis

from backend.deployment_keys import keys_of
from workers.contract.protocol import StopRequest

log = logging.getLogger(__name__)

JOB_UPDATES_CHANNEL = "tb:job-updates"
NODE_UPDATES_CHANNEL = "tb:node-updates"
SCHEDULER_WAKE_KEY = "tb:scheduler-wake"


def announce_jobs(client: redis.Redis, job_ids: Iterable[int]) -> None:
    """Tell every API process (and so every browser) that these jobs changed."""
    ids = sorted(set(job_ids))
    if ids:
        channel = keys_of(client).name(JOB_UPDATES_CHANNEL)
        _quietly(lambda: client.publish(channel, json.dumps(ids)))


def announce_nodes(client: redis.Redis) -> None:
    _quietly(lambda: client.publish(keys_of(client).name(NODE_UPDATES_CHANNEL), "1"))


def wake_scheduler(client: redis.Redis) -> None:
    """Make the scheduler run a pass now instead of at its next tick."""

    def push() -> None:
        key = keys_of(client).name(SCHEDULER_WAKE_KEY)
        pipe = client.pipeline()
        pipe.lpush(key, 1)
        pipe.ltrim(key, 0, 0)
        pipe.execute()

    _quietly(push)


def request_stop(client: redis.Redis, *, attempt_id: int, action: StopRequest) -> None:
    """Ask the supervisor of an attempt to stop its ranks (cancel, pause or preempt)."""
    key = keys_of(client).control(attempt_id)
    _quietly(lambda: client.set(key, action.value, ex=7 * 24 * 3600))


def request_stops(client: redis.Redis, *, attempt_ids: Sequence[int], action: StopRequest) -> None:
    """`request_stop` for many attempts in one round trip (a pass's preemption victims)."""
    keys = keys_of(client)

    def send() -> None:
        pipe = client.pipeline(transaction=False)
        for attempt_id in attempt_ids:
            pipe.set(keys.control(attempt_id), action.value, ex=7 * 24 * 3600)
        pipe.execute()

    if attempt_ids:
        _quietly(send)


def _quietly(action: object) -> None:
    try:
        action()  # type: ignore[operator]
    except redis.RedisError as err:
        log.warning("redis signal not sent: %s", err)
