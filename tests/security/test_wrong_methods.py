"""A wrong method on any route gets 405 and an `Allow` naming exactly the route's methods
(#30 finding 7: `GET /api/login` was a 404 from the frontend's catch-all, `GET
/api/jobs/bulk` a 401/422 from `/api/jobs/{job_id}`, `PUT /api/jobs` a 405 naming POST
alone)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from backend.security.methods import MethodGuard, templates_of
from tests.backend.conftest import bearer

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
#: routes outside the schema, with their methods
UNLISTED = {
    "/openapi.json": {"GET", "HEAD"},
    "/docs": {"GET", "HEAD"},
    "/redoc": {"GET", "HEAD"},
    "/metrics": {"GET"},
}


def _routes(api: TestClient) -> dict[str, set[str]]:
    schema = api.get("/openapi.json").json()
    listed = {path: {m.upper() for m in ops} for path, ops in schema["paths"].items()}
    return {**listed, **UNLISTED}


def test_every_wrong_method_on_every_route_gets_405_with_the_routes_methods(
    api: TestClient, tokens: dict[str, str]
) -> None:
    routes = _routes(api)
    assert len(routes) > 50
    wrong = []
    tried = 0
    for path, allowed in routes.items():
        concrete = re.sub(r"\{[^}]+\}", "1", path)
        for method in sorted(set(METHODS) - allowed):
            tried += 1
            response = api.request(method, concrete, headers=bearer(tokens["admin"]))
            got = set((response.headers.get("allow") or "").replace(" ", "").split(","))
            if response.status_code != 405 or got != allowed:
                wrong.append((method, path, response.status_code, response.headers.get("allow")))
    assert tried > 200
    assert wrong == []


def test_a_literal_route_is_not_taken_by_a_parameter_route_beside_it(
    api: TestClient, tokens: dict[str, str]
) -> None:
    admin = bearer(tokens["admin"])
    bulk = api.get("/api/jobs/bulk", headers=admin)  # before: 422 from /api/jobs/{job_id}
    assert (bulk.status_code, bulk.headers["allow"]) == (405, "POST")
    job = api.get("/api/jobs/12345", headers=admin)  # the parameter route still answers
    assert job.status_code == 404
    assert api.get("/api/nope", headers=admin).status_code == 404  # no route: still 404


def test_templates_that_tie_on_a_path_share_it() -> None:
    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        pass

    guard = MethodGuard(
        endpoint,
        templates=templates_of(
            [
                Route("/x/{a}/b", endpoint, methods=["GET"]),
                Route("/x/c/{d}", endpoint, methods=["POST"]),
                Route("/x/c/b/{e}", endpoint, methods=["DELETE"]),
                Route("/x/{a}", endpoint, methods=["PUT"]),
                Route("/x/c", endpoint, methods=["PATCH"]),
            ]
        ),
    )
    # one parameter each: both may serve it (Starlette's GET routes take HEAD too)
    assert guard.allowed("/x/c/b") == {"GET", "HEAD", "POST"}
    assert guard.allowed("/x/c") == {"PATCH"}  # the literal route owns its path
    assert guard.allowed("/x/7") == {"PUT"}
    assert guard.allowed("/y") == set()
