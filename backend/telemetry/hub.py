"""The websocket hub: topics, bounded per-client queues, snapshot-then-delta ordering."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from backend.auth.service import Principal

#: messages a client may lag behind before it is told to resync
CLIENT_QUEUE = 5000


class Client:
    """One websocket connection's outbox and subscriptions."""

    def __init__(self, principal: Principal) -> None:
        self.principal = principal
        self.outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue(CLIENT_QUEUE)
        #: topic → deltas held back until the topic's snapshot is queued (None when live)
        self.held: dict[str, list[dict[str, Any]] | None] = {}

    def can_see_owner(self, owner: str | None) -> bool:
        return self.principal.is_admin or owner == self.principal.username

    def deliver(self, topic: str, message: dict[str, Any]) -> None:
        held = self.held.get(topic)
        if held is not None:
            held.append(message)
            return
        try:
            self.outbox.put_nowait(message)
        except asyncio.QueueFull:
            self._fall_behind()

    def go_live(self, topic: str, snapshot: dict[str, Any]) -> None:
        """Queue the snapshot, then every delta that arrived while it was being read."""
        held = self.held.get(topic) or []
        self.held[topic] = None
        for message in [snapshot, *held]:
            self.deliver(topic, message)

    def _fall_behind(self) -> None:
        while not self.outbox.empty():
            self.outbox.get_nowait()
        self.outbox.put_nowait({"type": "resync", "topics": sorted(self.held)})


class Hub:
    """Fans deltas out to subscribed clients; publish() is safe from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.topics: dict[str, set[Client]] = defaultdict(set)
        self.filters: dict[str, Callable[[Client, dict[str, Any]], bool]] = {}

    def publish(self, topic: str, data: dict[str, Any]) -> None:
        self.loop.call_soon_threadsafe(self._fanout, topic, data)

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
        message = {"type": "delta", "topic": topic, "data": data}
        for client in list(self.topics.get(topic, ())):
            if topic == "jobs" and not client.can_see_owner(data.get("job", {}).get("owner")):
                continue
            client.deliver(topic, message)
