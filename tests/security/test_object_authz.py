"""Object-level authorization: on every job route in the schema, B gets 404 for A's job."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backend.db import Database
from tests.backend.conftest import bearer, ws_refusal
from tests.telemetry.helpers import add_attempt

SPEC = {"name": "alices-job", "template": "mlp", "parallelism": {"strategy": "data", "devices": 1}}
#: a valid body for every required request schema of a job route; add new ones here
BODIES: dict[str, Any] = {"JobSpec": SPEC, "JobEdit": {"name": "renamed"}}
PATH_VALUES = {"name": "loss"}


def _job_routes(api: TestClient) -> list[tuple[str, str, Any]]:
    schema = api.app.openapi()  # type: ignore[attr-defined]
    routes = []
    for path, item in schema["paths"].items():
        if "{job_id}" not in path:
            continue
        for method, operation in item.items():
            request_body = operation.get("requestBody", {})
            body = request_body.get("content", {}).get("application/json")
            ref = body["schema"].get("$ref", "").rsplit("/", 1)[-1] if body else None
            if not request_body.get("required"):
                routes.append((method.upper(), path, None))
                continue
            assert ref in BODIES, f"{method} {path}: add a valid {ref} body to BODIES"
            routes.append((method.upper(), path, BODIES[ref]))
    return routes


def _url(path: str, job_id: int) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: str(PATH_VALUES.get(m[1], job_id)), path)


@pytest.fixture
def alices_job(api: TestClient, two_users: dict[str, str]) -> int:
    created = api.post("/api/jobs", json=SPEC, headers=bearer(two_users["alice"]))
    assert created.status_code == 201
    return int(created.json()["id"])


def test_every_job_route_hides_alices_job_from_bob(
    api: TestClient, two_users: dict[str, str], alices_job: int
) -> None:
    routes = _job_routes(api)
    assert len(routes) >= 7
    for method, path, body in routes:
        url = _url(path, alices_job)
        response = api.request(method, url, json=body, headers=bearer(two_users["bob"]))
        assert response.status_code == 404, f"bob: {method} {path} -> {response.status_code}"
        missing = api.request(
            method, _url(path, 10_000), json=body, headers=bearer(two_users["bob"])
        )
        assert response.json() == {
            "detail": missing.json()["detail"].replace("10000", str(alices_job))
        }
    assert api.get("/api/jobs", headers=bearer(two_users["bob"])).json()["jobs"] == []


def test_owner_and_admin_reach_every_job_route(
    api: TestClient, two_users: dict[str, str], alices_job: int
) -> None:
    for who in ("alice", "admin"):
        for method, path, body in _job_routes(api):
            # a checkpoint download is its owner's alone, admins included, and this job has
            # none: tests/backend/test_checkpoints_api.py covers that route
            if method != "GET" or path.endswith("/download"):
                continue
            response = api.request(
                method, _url(path, alices_job), json=body, headers=bearer(two_users[who])
            )
            assert response.status_code == 200, f"{who}: {method} {path} -> {response.status_code}"


def test_bob_cannot_cancel_alices_job_and_it_stays_queued(
    api: TestClient, two_users: dict[str, str], alices_job: int
) -> None:
    bob = api.post(f"/api/jobs/{alices_job}/cancel", headers=bearer(two_users["bob"]))
    assert bob.status_code == 404
    job = api.get(f"/api/jobs/{alices_job}", headers=bearer(two_users["alice"])).json()
    assert job["state"] == "queued"


def test_bob_cannot_subscribe_to_alices_job_topic(
    api: TestClient, two_users: dict[str, str], alices_job: int
) -> None:
    with api.websocket_connect("/api/ws", headers=bearer(two_users["bob"])) as ws:
        ws.send_json({"op": "subscribe", "topic": f"job:{alices_job}"})
        answer = ws.receive_json()
        assert answer["type"] == "error" and answer["topic"] == f"job:{alices_job}"
        ws.send_json({"op": "subscribe", "topic": "jobs"})
        listed = ws.receive_json()
        assert (listed["type"], listed["data"]) == ("snapshot", {"jobs": []})
    with api.websocket_connect("/api/ws", headers=bearer(two_users["alice"])) as ws:
        ws.send_json({"op": "subscribe", "topic": f"job:{alices_job}"})
        snapshot = ws.receive_json()
        assert snapshot["type"] == "snapshot" and snapshot["data"]["job"]["id"] == alices_job


def _attempt_routes(api: TestClient) -> list[tuple[str, str, str]]:
    """(method, path, how) of every route naming an attempt: in its path or an attempt query."""
    schema = api.app.openapi()  # type: ignore[attr-defined]
    routes = []
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            names = {p["name"] for p in operation.get("parameters", [])}
            if "attempt_id" in names:
                routes.append((method.upper(), path, "path"))
            elif "attempt" in names:
                routes.append((method.upper(), path, "query"))
    return routes


def _call_with_attempt(api: TestClient, route: tuple[str, str, str], attempt_id: int) -> Any:
    method, path, how = route
    url = re.sub(r"\{(\w+)\}", lambda m: "loss" if m[1] == "name" else str(attempt_id), path)
    params = {"attempt": attempt_id} if how == "query" else None
    return api.request(method, url, params=params, headers=api.headers)


def test_every_attempt_route_answers_for_alices_attempt_as_for_a_missing_one(
    api: TestClient, two_users: dict[str, str], database: Database
) -> None:
    _, attempt = add_attempt(database, owner="alice")
    routes = _attempt_routes(api)
    assert ("GET", "/api/series/attempts/{name}", "query") in routes
    api.headers.update(bearer(two_users["bob"]))
    for route in routes:
        theirs = _call_with_attempt(api, route, attempt)
        missing = _call_with_attempt(api, route, 10_000)
        assert theirs.status_code == missing.status_code, route
        assert theirs.status_code in (403, 404), (route, theirs.status_code)
        assert theirs.text == missing.text.replace("10000", str(attempt)), route
    api.headers.update(bearer(two_users["alice"]))
    owner = api.get("/api/series/attempts/loss", params={"attempt": attempt})
    assert owner.status_code == 200 and owner.json()[0]["attempt_id"] == attempt


def test_websocket_needs_credentials_even_from_our_own_origin(api: TestClient) -> None:
    headers = {"Origin": "http://testserver"}
    assert ws_refusal(api, headers) == 4401
