"""The websocket endpoint: authenticate, subscribe, snapshot, then live deltas."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import redis
from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from starlette.types import Message

from backend.auth.deps import MAX_ID, credentials_from
from backend.auth.service import Principal, authenticate
from backend.db import Database
from backend.security.hosts import refuse_handshake
from backend.telemetry.live import feed
from backend.telemetry.live.hub import OUTLET_EXTENSION, Client, Hub, delta_text, encode
from backend.telemetry.live.revocation import SessionWatch
from backend.telemetry.live.snapshots import TopicRefused, current_state, snapshot
from backend.telemetry.series.cache import SeriesCache

router = APIRouter()
MAX_TOPICS = 64
#: characters of one client message, and of one topic name
MAX_MESSAGE, MAX_TOPIC = 4096, 128
USAGE = "expected {op: subscribe|unsubscribe, topic[, since]}"
#: close codes, as docs/security.md lists them
AUTH_REQUIRED, REVOKED = 4401, 4401
BINARY, NOT_JSON, TOO_BIG, BAD_TOPIC = 1003, 1007, 1009, 4422


class Refused(Exception):
    """The client broke the protocol: the connection closes with code and reason."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


@router.websocket("/api/ws")
async def websocket_endpoint(websocket: WebSocket) -> None:
    """Live topics: jobs, job:<id>, cluster; `since` resumes a topic after a reconnect."""
    principal = await _authenticate(websocket)
    if principal is None:
        return
    await websocket.accept()
    hub: Hub = websocket.app.state.hub
    watch: SessionWatch = websocket.app.state.session_watch
    outlet = websocket.scope.get("extensions", {}).get(OUTLET_EXTENSION)  # under direct.py
    client = Client(principal, outlet=outlet)
    sender = asyncio.create_task(_pump(websocket, client))

    async def revoked() -> None:
        hub.drop(client)
        await _close(websocket, REVOKED, "credentials revoked")

    watch.add(principal.token_id, revoked)
    try:
        while True:
            message = _parse(await websocket.receive())
            await _handle(websocket, hub, client, message)
    except Refused as refusal:
        await _close(websocket, refusal.code, refusal.reason)
    except (WebSocketDisconnect, RuntimeError):
        pass  # the client left, or the connection was closed (revoked) while reading
    finally:
        watch.discard(principal.token_id, revoked)
        hub.drop(client)
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sender


async def _authenticate(websocket: WebSocket) -> Principal | None:
    """The caller; a refusal is accepted and then closed, so that its code reaches the client."""
    secret, _ = credentials_from(websocket.headers, websocket.cookies)
    db: Database = websocket.app.state.db

    def check() -> Principal | None:
        with db.session() as session:
            return authenticate(session, secret) if secret else None

    principal = await asyncio.to_thread(check)
    if principal is None or "read" not in principal.scopes:
        await refuse_handshake(websocket, AUTH_REQUIRED, "authentication required")
        return None
    return principal


def _parse(message: Message) -> Any:
    """A client message's JSON value; Refused for a binary, oversized or non-JSON frame."""
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000))
    text = message.get("text")
    if text is None:
        raise Refused(BINARY, "binary frames are not accepted: send JSON text")
    if len(text) > MAX_MESSAGE:
        raise Refused(TOO_BIG, f"messages are at most {MAX_MESSAGE} characters")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise Refused(NOT_JSON, "messages must be JSON") from None


def _check_topic(topic: str) -> None:
    """Refused for a topic no client could mean: too long, or a job id out of range."""
    if len(topic) > MAX_TOPIC:
        raise Refused(BAD_TOPIC, f"topics are at most {MAX_TOPIC} characters")
    if topic.startswith("job:") and topic[4:].isdigit():
        digits = topic[4:]
        if not (digits.isascii() and len(digits) <= 10 and 1 <= int(digits) <= MAX_ID):
            raise Refused(BAD_TOPIC, f"job ids are 1..{MAX_ID}")


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    with contextlib.suppress(RuntimeError, OSError):
        await websocket.close(code=code, reason=reason)


async def _handle(websocket: WebSocket, hub: Hub, client: Client, message: Any) -> None:
    op = message.get("op") if isinstance(message, dict) else None
    topic = message.get("topic") if isinstance(message, dict) else None
    if op not in ("subscribe", "unsubscribe") or not isinstance(topic, str):
        client.send(encode({"type": "error", "message": USAGE}))
        return
    _check_topic(topic)
    if op == "unsubscribe":
        hub.unsubscribe(client, topic)
        return
    if len(client.held) >= MAX_TOPICS and topic not in client.held:
        client.send(encode({"type": "error", "topic": topic, "message": "too many subscriptions"}))
        return
    hub.subscribe(client, topic)
    since = message.get("since")
    db: Database = websocket.app.state.db
    redis_client: redis.Redis = websocket.app.state.redis
    cache: SeriesCache = websocket.app.state.series_cache
    try:
        first, position = await asyncio.to_thread(
            _first_messages, db, redis_client, cache, client, topic, since
        )
    except TopicRefused as err:
        hub.unsubscribe(client, topic)
        client.send(encode({"type": "error", "topic": topic, "message": str(err)}))
        return
    client.go_live(topic, first, position)


def _first_messages(
    db: Database,
    redis_client: redis.Redis,
    cache: SeriesCache,
    client: Client,
    topic: str,
    since: object,
) -> tuple[list[str], str]:
    """A replay of what the client missed after since, else a snapshot; and its position."""
    replay = None
    if isinstance(since, str) and topic != "jobs":
        replay = feed.read_since(redis_client, topic, since)
    with db.session() as session:
        if replay is not None:
            state = current_state(session, principal=client.principal, topic=topic)
            first = [encode({"type": "delta", "topic": topic, "data": state})]
            first += [delta_text(topic, position, data) for position, data in replay]
            return first, replay[-1][0] if replay else str(since)
        position = feed.last_position(redis_client)  # read before the snapshot: no gap
        data = snapshot(session, principal=client.principal, topic=topic, cache=cache)
    return [encode({"type": "snapshot", "topic": topic, "pos": position, "data": data})], position


async def _pump(websocket: WebSocket, client: Client) -> None:
    with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
        await client.pump(websocket.send_text)
