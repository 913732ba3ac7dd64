"""The websocket hub: topics, bounded per-client queues, snapshot-then-delta ordering.

Messages are encoded once per delta and shared by every subscriber. A delta that
came through the live stream carries its position (`pos`); a client that held
deltas while its snapshot (or replay) was read drops those at or before the
snapshot's position, so a reconnect with `since` is exact.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from typing import Any

from backend.auth.service import Principal
from backend.telemetry.live import parse_position

#: messages a client may lag behind before it is told to resync
CLIENT_QUEUE = 5000

#: (position or None, encoded message)
Frame = tuple[tuple[int, int] | None, str]


def encode(message: dict[str, Any]) -> str:
    """A message as compact JSON text."""
    return json.dumps(message, separators=(",", ":"))


class Client:
    """One websocket connection's outbox and subscriptions."""

    def __init__(self, principal: Principal, queue_size: int = CLIENT_QUEUE) -> None:
        self.principal = principal
        self.outbox: asyncio.Queue[str] = asyncio.Queue(queue_size)
        #: topic → frames held back until the topic's snapshot is queued (None when live)
        self.held: dict[str, list[Frame] | None] = {}

    def can_see_owner(self, owner: str | None) -> bool:
        return self.principal.is_admin or owner == self.principal.username

    def deliver(self, topic: str, frame: Frame) -> None:
        held = self.held.get(topic)
        if held is not None:
            held.append(frame)
            return
        self.send(frame[1])

    def send(self, text: str) -> None:
        """Queue one encoded message; a full queue makes the client resync."""
        try:
            self.outbox.put_nowait(text)
        except asyncio.QueueFull:
            self._fall_behind()

    def go_live(self, topic: str, first: list[str], position: str | None) -> None:
        """Queue first (a snapshot or a replay), then held frames after position."""
        held = self.held.get(topic) or []
        self.held[topic] = None
        after = parse_position(position) if position else None
        for text in first:
            self.send(text)
        for frame_position, text in held:
            if after is None or frame_position is None or frame_position > after:
                self.send(text)

    def _fall_behind(self) -> None:
        while not self.outbox.empty():
            self.outbox.get_nowait()
        self.outbox.put_nowait(encode({"type": "resync", "topics": sorted(self.held)}))


class Hub:
    """Fans deltas out to subscribed clients; publish() is safe from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.topics: dict[str, set[Client]] = defaultdict(set)

    def publish(self, topic: str, data: dict[str, Any]) -> None:
        """Fan out a delta that has no position (job views, node lists)."""
        self.loop.call_soon_threadsafe(self._fanout, topic, data)

    def publish_raw(self, topic: str, position: str, data: str) -> None:
        """Fan out a live-stream delta: its position and its data as JSON text."""
        self.loop.call_soon_threadsafe(self._fanout_raw, topic, position, data)

    def subscribe(self, client: Client, topic: str) -> None:
        """Hold deltas for topic from now on; go_live() releases them after the snapshot."""
        client.held[topic] = []
        self.topics[topic].add(client)

    def unsubscribe(self, client: Client, topic: str) -> None:
        client.held.pop(topic, None)
        self.topics[topic].discard(client)

    def drop(self, client: Client) -> None:
        for topic in list(client.held):
            self.unsubscribe(client, topic)

    def _fanout(self, topic: str, data: dict[str, Any]) -> None:
        text = encode({"type": "delta", "topic": topic, "data": data})
        owner = data.get("job", {}).get("owner") if topic == "jobs" else None
        for client in list(self.topics.get(topic, ())):
            if topic == "jobs" and not client.can_see_owner(owner):
                continue
            client.deliver(topic, (None, text))

    def _fanout_raw(self, topic: str, position: str, data: str) -> None:
        subscribers = self.topics.get(topic)
        if not subscribers:
            return
        frame = (parse_position(position), delta_text(topic, position, data))
        for client in list(subscribers):
            client.deliver(topic, frame)


def delta_text(topic: str, position: str, data: str) -> str:
    """A positioned delta message, built around data JSON without re-encoding it."""
    return f'{{"type":"delta","topic":{json.dumps(topic)},"pos":"{position}","data":{data}}}'
