"""The websocket endpoint: authenticate, subscribe, snapshot, then live deltas."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import redis
from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from backend.auth.service import Principal, authenticate
from backend.db import Database
from backend.deps import credentials_from, origin_allowed
from backend.telemetry import live
from backend.telemetry.cache import SeriesCache
from backend.telemetry.hub import OUTLET_EXTENSION, Client, Hub, delta_text, encode
from backend.telemetry.snapshots import TopicRefused, current_state, snapshot

router = APIRouter()
MAX_TOPICS = 64
USAGE = "expected {op: subscribe|unsubscribe, topic[, since]}"


@router.websocket("/api/ws")
async def websocket_endpoint(websocket: WebSocket) -> None:
    """Live topics: jobs, job:<id>, cluster; `since` resumes a topic after a reconnect."""
    principal = await _authenticate(websocket)
    if principal is None:
        return
    await websocket.accept()
    hub: Hub = websocket.app.state.hub
    outlet = websocket.scope.get("extensions", {}).get(OUTLET_EXTENSION)  # under direct.py
    client = Client(principal, outlet=outlet)
    sender = asyncio.create_task(_pump(websocket, client))
    try:
        while True:
            message = await websocket.receive_json()
            await _handle(websocket, hub, client, message)
    except (WebSocketDisconnect, RuntimeError, ValueError):
        pass
    finally:
        hub.drop(client)
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sender


async def _authenticate(websocket: WebSocket) -> Principal | None:
    origin = websocket.headers.get("origin")
    settings = websocket.app.state.settings
    if origin is not None and not origin_allowed(origin, websocket.headers.get("host"), settings):
        await websocket.close(code=4403, reason="foreign origin")
        return None
    secret, _ = credentials_from(websocket.headers, websocket.cookies)
    db: Database = websocket.app.state.db

    def check() -> Principal | None:
        with db.session() as session:
            return authenticate(session, secret) if secret else None

    principal = await asyncio.to_thread(check)
    if principal is None or "read" not in principal.scopes:
        await websocket.close(code=4401, reason="authentication required")
        return None
    return principal


async def _handle(websocket: WebSocket, hub: Hub, client: Client, message: Any) -> None:
    op = message.get("op") if isinstance(message, dict) else None
    topic = message.get("topic") if isinstance(message, dict) else None
    if op not in ("subscribe", "unsubscribe") or not isinstance(topic, str):
        client.send(encode({"type": "error", "message": USAGE}))
        return
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
        replay = live.read_since(redis_client, topic, since)
    with db.session() as session:
        if replay is not None:
            state = current_state(session, principal=client.principal, topic=topic)
            first = [encode({"type": "delta", "topic": topic, "data": state})]
            first += [delta_text(topic, position, data) for position, data in replay]
            return first, replay[-1][0] if replay else str(since)
        position = live.last_position(redis_client)  # read before the snapshot: no gap
        data = snapshot(session, principal=client.principal, topic=topic, cache=cache)
    return [encode({"type": "snapshot", "topic": topic, "pos": position, "data": data})], position


async def _pump(websocket: WebSocket, client: Client) -> None:
    with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
        await client.pump(websocket.send_text)
