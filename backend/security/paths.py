"""NUL bytes in a URL name nothing: 404 in the path, 422 in the query (before any route runs)."""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from backend.security.asgi import HttpMiddleware


def has_nul(scope: Scope) -> tuple[bool, bool]:
    """Whether the decoded path, and whether the query string, hold a NUL byte."""
    query: bytes = scope.get("query_string", b"")
    return "\x00" in scope["path"], b"\x00" in query or b"%00" in query


class PathGuard(HttpMiddleware):
    """A file name, a metric name or an id never holds NUL; PostgreSQL and os.stat refuse it."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        in_path, in_query = has_nul(scope)
        if not (in_path or in_query):
            return await self.app(scope, receive, send)
        if in_path:
            refusal = JSONResponse({"detail": "Not Found"}, status_code=404)
        else:
            error = {"type": "value_error", "loc": ["query"], "msg": "NUL bytes are not allowed"}
            refusal = JSONResponse({"detail": [error]}, status_code=422)
        await refusal(scope, receive, send)
