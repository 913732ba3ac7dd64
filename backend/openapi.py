"""The API's OpenAPI schema with every refusal an operation can answer (`python -m
backend.app` prints the whole schema: the frontend's types are generated from it).

FastAPI declares a 200 and, where there are parameters, a 422. The refusals come from
elsewhere (the authentication dependency, the body guard, the rate limits, the state
checks of the services), so they are added here from what each route depends on and a
table of the operations that refuse a state change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from backend.auth.deps import get_principal, refuse_cross_site

REFUSAL = {
    "type": "object",
    "properties": {"detail": {"title": "Detail", "description": "why (text or field errors)"}},
    "title": "Refusal",
}
REFUSED = {"$ref": "#/components/schemas/Refusal"}
WHY = {
    400: "the body is not JSON",
    401: "no valid credentials",
    403: "the credentials lack the scope or role (or a cross-site write)",
    404: "no such object, or not the caller's",
    409: "the object's state does not allow it",
    413: "request body too large",
    422: "invalid input",
    429: "rate limit reached: retry after Retry-After seconds",
}
#: operations whose service refuses a state change or a duplicate (409)
CONFLICTS = {
    ("POST", "/api/jobs/{job_id}/cancel"),
    ("POST", "/api/jobs/{job_id}/pause"),
    ("POST", "/api/jobs/{job_id}/resume"),
    ("POST", "/api/sweeps/{sweep_id}/cancel"),
    ("POST", "/api/users"),
    ("POST", "/api/attempts/{attempt_id}/claim"),
}
#: operations that look objects up by ids in the query (404)
QUERY_LOOKUPS = {
    ("GET", "/api/provenance/diff"),
    ("GET", "/api/series/compare"),
    ("GET", "/api/series/compare.csv"),
    ("GET", "/api/series/costs"),
}
#: operations counted against a rate limit (429), besides those whose dependency counts
LIMITED = {("POST", "/api/login"), ("POST", "/api/sweeps")}
#: operations that refuse bad credentials without the authentication dependency
LOGINS = {("POST", "/api/login")}
#: the rate-limit dependencies (by name: backend.security.ratelimit imports backend.auth.deps)
LIMITING = {"_submission", "_minting", "_webhook_creation"}


def _calls(dependant: Dependant) -> Iterator[Callable[..., Any]]:
    for dependency in dependant.dependencies:
        if dependency.call is not None:
            yield dependency.call
        yield from _calls(dependency)


def refusals_of(route: APIRoute, method: str) -> set[int]:
    """The 4xx codes one operation can answer."""
    calls = set(_calls(route.dependant))
    names = {getattr(call, "__name__", "") for call in calls}
    key = (method, route.path)
    codes: set[int] = set()
    if get_principal in calls:
        codes |= {401, 403}
    if refuse_cross_site in calls:
        codes.add(403)
    if key in LOGINS:
        codes.add(401)
    if route.dependant.path_params:
        codes |= {404, 422}
    if key in QUERY_LOOKUPS:
        codes.add(404)
    if route.dependant.query_params:
        codes.add(422)
    if route.dependant.body_params:
        codes |= {400, 413, 422}
    if key in CONFLICTS:
        codes.add(409)
    if key in LIMITED or names & LIMITING:
        codes.add(429)
    return codes


def declare_refusals(schema: dict[str, Any], routes: Iterable[APIRoute]) -> dict[str, Any]:
    """Add each operation's refusals to schema (in place; declared ones are kept)."""
    schema.setdefault("components", {}).setdefault("schemas", {})["Refusal"] = REFUSAL
    paths = schema.get("paths", {})
    for route in routes:
        for method in route.methods or ():
            operation = paths.get(route.path, {}).get(method.lower())
            if operation is None:
                continue
            responses = operation.setdefault("responses", {})
            for code in sorted(refusals_of(route, method)):
                if str(code) in responses:
                    continue
                declared: dict[str, Any] = {
                    "description": WHY[code],
                    "content": {"application/json": {"schema": REFUSED}},
                }
                if code == 429:
                    declared["headers"] = {
                        "Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}
                    }
                responses[str(code)] = declared
    return schema


def install(app: FastAPI, routes: Iterable[APIRoute]) -> None:
    """Make app's schema declare every operation's refusals."""
    generate, routes = app.openapi, list(routes)

    def openapi() -> dict[str, Any]:
        return declare_refusals(generate(), routes)

    app.openapi = openapi  # type: ignore[method-assign]
