"""Refuse requests for a Host not ours (DNS rebinding) and websockets from foreign Origins."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket


def origin_allowed(origin: str | None, host: str | None, origins: list[str]) -> bool:
    """No Origin (not a browser), the request's own origin, or one CORS is configured to admit."""
    if origin is None:
        return True
    if host and urlsplit(origin).netloc.lower() == host.lower():
        return True
    return origin.lower() in origins


def host_name(host: str) -> str:
    """The name part of a Host header: lowercase, without port, brackets or trailing dot."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else ""
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return name.rstrip(".")


def host_allowed(host: str, allowed: frozenset[str]) -> bool:
    """An allow-listed name, or an IP literal (a rebinding attack always sends a domain name)."""
    name = host_name(host)
    if not name:
        return False
    if "*" in allowed or name in allowed:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


async def refuse_handshake(websocket: WebSocket, code: int, reason: str) -> None:
    """Accept, then close with code: refused before accept, a browser sees only HTTP 403 (1006)."""
    await websocket.accept()
    await websocket.close(code=code, reason=reason)


class HostGuard:
    """400 for an unknown Host (websockets: close 4400); a foreign websocket Origin: close 4403."""

    def __init__(self, app: ASGIApp, *, allowed: frozenset[str], origins: list[str]) -> None:
        self.app, self.allowed, self.origins = app, allowed, origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        websocket = scope["type"] == "websocket"
        if not host_allowed(host, self.allowed):
            if websocket:
                return await refuse_handshake(WebSocket(scope, receive, send), 4400, "unknown host")
            refusal = JSONResponse({"detail": "unknown Host header"}, status_code=400)
            return await refusal(scope, receive, send)
        if websocket and not origin_allowed(headers.get("origin"), host, self.origins):
            return await refuse_handshake(WebSocket(scope, receive, send), 4403, "foreign origin")
        await self.app(scope, receive, send)
