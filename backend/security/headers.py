"""Headers that keep the browser from sniffing, framing or caching what the API returns."""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import Message, Receive, Scope, Send

from backend.security.asgi import HttpMiddleware

CSP = (
    "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
#: FastAPI's interactive docs load their scripts from a CDN
_DOCS = ("/docs", "/redoc")
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}


class SecurityHeaders(HttpMiddleware):
    """Adds the headers above, a CSP outside the docs, and no-store on API answers."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers.setdefault(name, value)
                if not path.startswith(_DOCS):
                    headers.setdefault("Content-Security-Policy", CSP)
                if path.startswith("/api/"):
                    headers.setdefault("Cache-Control", "no-store")
            await send(message)

        await self.app(scope, receive, with_headers)
