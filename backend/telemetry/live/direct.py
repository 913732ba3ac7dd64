"""Websocket connections the hub writes pre-framed messages to, skipping per-client sends.

Through Starlette and uvicorn, each message costs every client a task switch, an
ASGI send and its own framing (and its own zlib compression when the browser
negotiated permessage-deflate), which adds up across a thousand clients (docs/benchmarks.md,
"Live delivery"). `DirectWebSocketProtocol` is uvicorn's
websockets-sansio protocol with two changes:

- permessage-deflate is negotiated with `server_no_context_takeover`, so a message
  compresses to the same bytes for every client with the same window size;
- the app finds a `DirectOutlet` for the connection in the ASGI scope's extensions.

The hub frames a message once per connection format (plain, or deflated with N
window bits) and writes those bytes to each client's transport from the fan-out
loop: one send() per client. Reads, pings, the handshake and
closing stay uvicorn's; a client whose transport pushes back gets a backlog instead
(hub.py). Other servers, and `uvicorn --ws auto`, run the app without an outlet,
through ASGI sends as before.

This reads uvicorn internals (the protocol's `conn`, `transport` and `writable`),
as of uvicorn 0.50-0.54; tests/telemetry/test_ws_fanout.py runs through them.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.extensions import Extension
from websockets.extensions.permessage_deflate import (
    PerMessageDeflate,
    ServerPerMessageDeflateFactory,
)
from websockets.frames import Frame, Opcode
from websockets.protocol import OPEN

from backend.telemetry.live.hub import OUTLET_EXTENSION, Message

#: `uvicorn --ws` value for Trainboard's API
WS_PROTOCOL = "backend.telemetry.live.direct:DirectWebSocketProtocol"

#: uvicorn's own settings (12-bit windows, memLevel 5), minus server context takeover
DEFLATE = ServerPerMessageDeflateFactory(
    server_no_context_takeover=True,
    server_max_window_bits=12,
    client_max_window_bits=12,
    compress_settings={"memLevel": 5},
)


class DirectOutlet:
    """Writes a message's shared frame straight to one connection's transport."""

    def __init__(self, protocol: WebSocketsSansIOProtocol, form: tuple[object, list[Extension]]):
        # the fan-out reads these for every client: kept at hand rather than via protocol
        self._conn, self._transport, self._writable = (
            protocol.conn,
            protocol.transport,
            protocol.writable,
        )
        self._key, self._extensions = form

    @classmethod
    def of(cls, protocol: WebSocketsSansIOProtocol) -> DirectOutlet | None:
        """The outlet for a handshaken connection; None if its frames cannot be shared."""
        form = _shared_form(protocol.conn.extensions)
        return cls(protocol, form) if form is not None else None

    @property
    def open(self) -> bool:
        return self._conn.state is OPEN and not self._transport.is_closing()

    @property
    def ready(self) -> bool:
        return (
            self._writable.is_set()
            and self._conn.state is OPEN
            and not self._transport.is_closing()
        )

    def write(self, message: Message) -> None:
        data = message.frames.get(self._key)
        if data is None:
            frame = Frame(Opcode.TEXT, message.text.encode())
            data = message.frames[self._key] = frame.serialize(
                mask=False, extensions=self._extensions
            )
        self._transport.write(data)

    async def writable(self) -> None:
        await self._writable.wait()  # uvicorn sets it on connection loss too


def _shared_form(extensions: list[Extension]) -> tuple[object, list[Extension]] | None:
    """(cache key, extensions to frame with) when a message's frame is the same for all peers."""
    if not extensions:
        return "plain", []
    match extensions:
        case [PerMessageDeflate(local_no_context_takeover=True) as deflate]:
            return ("deflate", deflate.local_max_window_bits), [deflate]
    return None


class DirectWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's websockets-sansio protocol, offering the app a DirectOutlet."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.config.ws_per_message_deflate:
            self.conn.available_extensions = [DEFLATE]

    async def run_asgi(self) -> None:
        outlet = DirectOutlet.of(self)  # the handshake request is negotiated by now
        if outlet is not None:
            self.scope.setdefault("extensions", {})[OUTLET_EXTENSION] = outlet  # type: ignore[assignment]
        await super().run_asgi()
