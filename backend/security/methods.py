"""405 with a correct `Allow` for a wrong method on any route.

Starlette alone answers a wrong method with whatever else matches the path: the
frontend's catch-all `GET /{path:path}` (a 404 for `GET /api/login`), a route with a path
parameter that takes a literal segment (`GET /api/jobs/bulk` reaching `GET /api/jobs/{job_id}`:
a 422), or a 405 naming only the first of several routes on one path. This guard knows
every route's path template: a path belongs to the most specific templates that match it
(fewest parameters), and a method none of their routes takes gets 405 listing exactly the
methods they take.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from starlette.responses import JSONResponse
from starlette.routing import Route, compile_path
from starlette.types import ASGIApp, Receive, Scope, Send


@dataclass(frozen=True)
class Template:
    """One path template and every method its routes take."""

    path: str
    pattern: re.Pattern[str]
    params: int
    methods: frozenset[str]


def templates_of(routes: Iterable[Route]) -> list[Template]:
    """The routes grouped by path template, each with the union of its routes' methods."""
    methods: dict[str, set[str]] = {}
    for route in routes:
        methods.setdefault(route.path, set()).update(route.methods or ())
    made = []
    for path, taken in methods.items():
        pattern, _, convertors = compile_path(path)
        made.append(Template(path, pattern, len(convertors), frozenset(taken)))
    return made


class MethodGuard:
    """Answers 405 + Allow when the path's own template does not take the method."""

    def __init__(self, app: ASGIApp, *, templates: list[Template]) -> None:
        self.app, self.templates = app, templates

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            allowed = self.allowed(scope["path"])
            if allowed and scope["method"] not in allowed:
                allow = ", ".join(sorted(allowed))
                refusal = JSONResponse(
                    {"detail": f"method not allowed (allowed: {allow})"},
                    status_code=405,
                    headers={"Allow": allow},
                )
                return await refusal(scope, receive, send)
        await self.app(scope, receive, send)

    def allowed(self, path: str) -> frozenset[str]:
        """The methods of the most specific templates matching path (fewest parameters;
        several only where two such templates tie); empty where none matches."""
        matching = [t for t in self.templates if t.pattern.match(path)]
        if not matching:
            return frozenset()
        fewest = min(t.params for t in matching)
        return frozenset().union(*(t.methods for t in matching if t.params == fewest))
