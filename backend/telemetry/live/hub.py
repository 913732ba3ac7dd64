"""The websocket hub: topics, bounded per-client backlogs, snapshot-then-delta ordering.

Messages are encoded once per delta and shared by every subscriber. A delta that
came through the live stream carries its position (`pos`); a client that held
deltas while its snapshot (or replay) was read drops those at or before the
snapshot's position, so a reconnect with `since` is exact.

A client whose connection offers an `Outlet` (direct.py) is written to from the
fan-out loop itself while it keeps up; only a client whose connection pushes back
gets a backlog, which its pump task sends in order once the connection drains.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from backend.auth.service import Principal
from backend.telemetry.live.feed import parse_position

#: messages a client may lag behind before it is told to resync
CLIENT_QUEUE = 5000
#: the ASGI scope extension under which a server offers a connection's Outlet (direct.py)
OUTLET_EXTENSION = "trainboard.outlet"


class Message:
    """One encoded message; `frames` caches its websocket frame per connection format."""

    __slots__ = ("frames", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.frames: dict[object, bytes] = {}


#: (position or None, message)
Frame = tuple[tuple[int, int] | None, Message]


class Outlet(Protocol):
    """A connection the hub may write a message to synchronously."""

    @property
    def open(self) -> bool: ...

    @property
    def ready(self) -> bool:
        """Open, and its transport is not pushing back."""

    def write(self, message: Message) -> None: ...

    async def writable(self) -> None:
        """Return once the transport takes writes again (or the connection is gone)."""


def encode(message: dict[str, Any]) -> str:
    """A message as compact JSON text."""
    return json.dumps(message, separators=(",", ":"))


class Client:
    """One websocket connection's subscriptions and, while it lags, its backlog."""

    def __init__(
        self, principal: Principal, queue_size: int | None = None, outlet: Outlet | None = None
    ) -> None:
        self.principal = principal
        self.queue_size = queue_size or CLIENT_QUEUE
        self.outlet = outlet
        self.backlog: deque[Message] = deque()
        self._lagging = asyncio.Event()  # set while the backlog is not empty
        #: topic → frames held back until the topic's snapshot is queued (None when live)
        self.held: dict[str, list[Frame] | None] = {}

    def can_see_owner(self, owner: str | None) -> bool:
        return self.principal.is_admin or owner == self.principal.username

    def deliver(self, topic: str, frame: Frame) -> None:
        held = self.held.get(topic)
        if held is not None:
            held.append(frame)
            return
        self.put(frame[1])

    def send(self, text: str) -> None:
        """Send one encoded message to this client alone."""
        self.put(Message(text))

    def put(self, message: Message) -> None:
        """Write message now if nothing is waiting before it, else queue it (full: resync)."""
        outlet = self.outlet
        if outlet is not None and not self.backlog:
            if outlet.ready:
                outlet.write(message)
                return
            if not outlet.open:
                return  # the connection is gone; the endpoint drops this client
        if len(self.backlog) >= self.queue_size:
            self._fall_behind()
            return
        self.backlog.append(message)
        self._lagging.set()

    async def pump(self, send_text: Callable[[str], Awaitable[None]]) -> None:
        """Send the backlog in order: through the outlet when it drains, else by send_text."""
        outlet = self.outlet
        while True:
            await self._lagging.wait()
            if outlet is None:
                message = self.backlog.popleft()
                if not self.backlog:
                    self._lagging.clear()
                await send_text(message.text)
                continue
            await outlet.writable()
            if not outlet.open:
                return
            # no await between taking a message and writing it: put() cannot overtake
            while self.backlog and outlet.ready:
                outlet.write(self.backlog.popleft())
            if not self.backlog:
                self._lagging.clear()

    def go_live(self, topic: str, first: list[str], position: str | None) -> None:
        """Send first (a snapshot or a replay), then held frames after position."""
        held = self.held.get(topic) or []
        self.held[topic] = None
        after = parse_position(position) if position else None
        for text in first:
            self.send(text)
        for frame_position, message in held:
            if after is None or frame_position is None or frame_position > after:
                self.put(message)

    def _fall_behind(self) -> None:
        self.backlog.clear()
        self.backlog.append(Message(encode({"type": "resync", "topics": sorted(self.held)})))
        self._lagging.set()


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
        message = Message(encode({"type": "delta", "topic": topic, "data": data}))
        owner = data.get("job", {}).get("owner") if topic == "jobs" else None
        for client in list(self.topics.get(topic, ())):
            if topic == "jobs" and not client.can_see_owner(owner):
                continue
            client.deliver(topic, (None, message))

    def _fanout_raw(self, topic: str, position: str, data: str) -> None:
        subscribers = self.topics.get(topic)
        if not subscribers:
            return
        frame = (parse_position(position), Message(delta_text(topic, position, data)))
        for client in list(subscribers):
            client.deliver(topic, frame)


def delta_text(topic: str, position: str, data: str) -> str:
    """A positioned delta message, built around data JSON without re-encoding it."""
    return f'{{"type":"delta","topic":{json.dumps(topic)},"pos":"{position}","data":{data}}}'
