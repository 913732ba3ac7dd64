"""Bookkeeping on the telemetry streams: safe trimming and how far the ingest lags."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import redis

from workers.contract.protocol import INGEST_GROUP

#: consumers idle this long with nothing pending are removed from the group
IDLE_CONSUMER_MS = 3_600_000


@dataclass(frozen=True)
class Backlog:
    """Entries of one stream the ingest group has not acknowledged yet."""

    pending: int
    undelivered: int
    oldest_seconds: float


def _group(client: redis.Redis, stream: str) -> dict[str, Any] | None:
    try:
        groups: Any = client.xinfo_groups(stream)
    except redis.ResponseError:  # no such stream
        return None
    for group in groups:
        if as_text(group["name"]) == INGEST_GROUP:
            return dict(group)
    return None


def oldest_unacknowledged(client: redis.Redis, stream: str) -> str | None:
    """The id of the stream's oldest entry the group has not acknowledged; None if none."""
    group = _group(client, stream)
    if group is None:
        return None
    if group["pending"]:
        summary: Any = client.xpending(stream, INGEST_GROUP)
        if summary["min"] is not None:  # None: acknowledged since the group was read
            return as_text(summary["min"])
    after: Any = client.xrange(stream, min=f"({as_text(group['last-delivered-id'])}", count=1)
    return as_text(after[0][0]) if after else None


def trim_acknowledged(client: redis.Redis, stream: str) -> None:
    """Delete entries below the oldest unacknowledged one (only what the group has acked)."""
    group = _group(client, stream)
    if group is None:
        return
    keep_from = oldest_unacknowledged(client, stream) or as_text(group["last-delivered-id"])
    client.xtrim(stream, minid=keep_from, approximate=True)
    consumers: Any = client.xinfo_consumers(stream, INGEST_GROUP)
    for consumer in consumers:
        if not consumer["pending"] and consumer["idle"] > IDLE_CONSUMER_MS:
            client.xgroup_delconsumer(stream, INGEST_GROUP, consumer["name"])


def backlog(client: redis.Redis, stream: str) -> Backlog:
    """Pending and undelivered entry counts and the age of the oldest unacknowledged one."""
    group = _group(client, stream)
    if group is None:
        return Backlog(0, 0, 0.0)
    oldest = oldest_unacknowledged(client, stream)
    age = max(0.0, time.time() - int(oldest.split("-")[0]) / 1000) if oldest else 0.0
    return Backlog(int(group["pending"]), int(group.get("lag") or 0), age)


def as_text(value: Any) -> str:
    """A Redis reply value as str."""
    return value.decode() if isinstance(value, bytes) else str(value)
