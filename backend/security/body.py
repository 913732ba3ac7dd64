"""Request bodies: at most max_bytes (413); JSON no deeper than max_depth, no NaN (422)."""

from __future__ import annotations

import json
import re

import numpy as np
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(rb"[^\[\]{}]")
#: Python's json module accepts these; JSON does not, and they cannot be answered back
_NON_FINITE = re.compile(rb"NaN|Infinity")
_ESCAPED_BACKSLASH = re.compile(rb"\\\\")
_SURROGATE_PAIR = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}")
#: a lone surrogate decodes to a str that cannot be encoded again (not stored, not echoed)
_LONE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
#: no name, path or text of ours holds NUL, and PostgreSQL cannot store it in text
_NUL = re.compile(rb"\\u0000|\x00")
NUL_PROBLEM = "JSON strings must not hold NUL characters (\\u0000)"
_WITH_BODY = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class TooLarge(Exception):
    pass


class Disconnected(Exception):
    pass


def json_problem(body: bytes, max_depth: int) -> str | None:
    """Why a JSON text is refused before parsing (too deep, NaN, NUL, lone surrogate), or None."""
    bare = _STRING.sub(b"", body)
    if json_depth(bare) > max_depth:
        return f"JSON nested deeper than {max_depth} levels"
    if _NON_FINITE.search(bare):
        return "JSON does not allow NaN or Infinity"
    unescaped = _ESCAPED_BACKSLASH.sub(b"", body)
    if _NUL.search(unescaped):
        return NUL_PROBLEM
    if _LONE_SURROGATE.search(_SURROGATE_PAIR.sub(b"", unescaped)):
        return "JSON strings must not hold lone surrogates (\\ud800-\\udfff)"
    return None


def nul_loc(body: bytes) -> list[str | int]:
    """Where in a (parseable) JSON body the first string holding NUL is, else nowhere."""
    try:
        value = json.loads(body)
    except ValueError:
        return []
    return _nul_in(value) or []


def _nul_in(value: object) -> list[str | int] | None:
    if isinstance(value, str):
        return [] if "\x00" in value else None
    items: list[tuple[str | int, object]] = []
    if isinstance(value, dict):
        items = list(value.items())
        found_key = next((k for k in value if "\x00" in k), None)
        if found_key is not None:
            return [found_key]
    elif isinstance(value, list):
        items = list(enumerate(value))
    for key, item in items:
        below = _nul_in(item)
        if below is not None:
            return [key, *below]
    return None


def json_depth(bare: bytes) -> int:
    """How deeply arrays and objects nest in a JSON text whose strings are removed."""
    brackets = np.frombuffer(_NOT_BRACKET.sub(b"", bare), dtype=np.uint8)
    if not brackets.size:
        return 0
    steps = np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


def is_json(content_type: str | None) -> bool:
    """FastAPI parses a body as JSON when it has no content type or a JSON one."""
    if not content_type:
        return True
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


class BodyGuard:
    """Reads a request body up front, refusing it cleanly when too large or too deep."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, max_depth: int) -> None:
        self.app, self.max_bytes, self.max_depth = app, max_bytes, max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _WITH_BODY:
            return await self.app(scope, receive, send)
        headers = Headers(scope=scope)
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await self._too_large(scope, receive, send)
        try:
            body = await self._read(receive)
        except TooLarge:
            return await self._too_large(scope, receive, send)
        except Disconnected:
            return None
        problem = (
            json_problem(body, self.max_depth) if is_json(headers.get("content-type")) else None
        )
        if problem is not None:
            where = nul_loc(body) if problem == NUL_PROBLEM else []
            error = {"type": "json_invalid", "loc": ["body", *where], "msg": problem}
            return await JSONResponse({"detail": [error]}, status_code=422)(scope, receive, send)
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise Disconnected
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = {"detail": f"request body larger than {self.max_bytes} bytes"}
        await JSONResponse(detail, status_code=413)(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
