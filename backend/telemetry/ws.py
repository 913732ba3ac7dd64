"""The websocket endpoint: authenticate, subscribe, snapshot, then live deltas."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from starlette.websockets import WebSocketState

from backend.auth.service import Principal, authenticate
from backend.db import Database
from backend.deps import credentials_from, same_origin
from backend.telemetry.hub import Client, Hub
from backend.telemetry.snapshots import TopicRefused, snapshot

router = APIRouter()
MAX_TOPICS = 64


@router.websocket("/api/ws")
async def websocket_endpoint(websocket: WebSocket) -> None:
    """Live topics: jobs, job:<id>, cluster."""
    principal = await _authenticate(websocket)
    if principal is None:
        return
    await websocket.accept()
    hub: Hub = websocket.app.state.hub
    client = Client(principal)
    sender = asyncio.create_task(_send_loop(websocket, client))
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
    if origin is not None and not same_origin(origin, websocket.headers.get("host")):
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
        await client.outbox.put(
            {"type": "error", "message": "expected {op: subscribe|unsubscribe, topic}"}
        )
        return
    if op == "unsubscribe":
        hub.unsubscribe(client, topic)
        return
    if len(client.held) >= MAX_TOPICS:
        await client.outbox.put(
            {"type": "error", "topic": topic, "message": "too many subscriptions"}
        )
        return
    hub.subscribe(client, topic)
    db: Database = websocket.app.state.db

    def read() -> dict[str, Any]:
        with db.session() as session:
            return snapshot(session, principal=client.principal, topic=topic)

    try:
        data = await asyncio.to_thread(read)
    except TopicRefused as err:
        hub.unsubscribe(client, topic)
        await client.outbox.put({"type": "error", "topic": topic, "message": str(err)})
        return
    client.go_live(topic, {"type": "snapshot", "topic": topic, "data": data})


async def _send_loop(websocket: WebSocket, client: Client) -> None:
    while websocket.client_state is WebSocketState.CONNECTED:
        message = await client.outbox.get()
        await websocket.send_json(message)
