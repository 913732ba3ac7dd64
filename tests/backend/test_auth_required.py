"""Nothing but the public routes answers without credentials; websockets too."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from tests.backend.conftest import bearer, ws_refusal

PUBLIC = {("GET", "/api/health"), ("POST", "/api/login"), ("GET", "/api/session")}


def _operations(api: TestClient) -> list[tuple[str, str]]:
    schema = api.app.openapi()  # type: ignore[attr-defined]
    return [(m.upper(), p) for p, item in schema["paths"].items() for m in item]


def test_every_private_route_answers_401_without_credentials(api: TestClient) -> None:
    operations = _operations(api)
    assert len(operations) >= 15
    for method, path in operations:
        if (method, path) in PUBLIC:
            continue
        concrete = re.sub(r"\{[^}]+\}", "1", path)
        response = api.request(method, concrete, json={})
        assert response.status_code == 401, f"{method} {path} answered {response.status_code}"
        response = api.request(method, concrete, json={}, headers=bearer("tb_not-a-real-token"))
        assert response.status_code == 401, f"{method} {path} took a bogus token"


def test_public_routes_answer(api: TestClient) -> None:
    assert api.get("/api/health").json() == {"status": "ok", "database": "ok"}
    assert api.post("/api/login", json={"token": "tb_wrong"}).status_code == 401
    # the app asks this before anyone logged in: a 200 naming nobody, not a 401 in the console
    assert api.get("/api/session").json() == {"user": None}
    assert api.get("/api/session", headers=bearer("tb_not-a-real-token")).json() == {"user": None}


def test_the_session_route_names_the_signed_in_user(
    api: TestClient, tokens: dict[str, str]
) -> None:
    login = api.post("/api/login", json={"token": tokens["alice"]})
    assert login.status_code == 200
    assert api.get("/api/session").json()["user"]["username"] == "alice"  # by its cookie
    api.post("/api/logout")
    assert api.get("/api/session").json() == {"user": None}


def test_websocket_without_credentials_is_refused(api: TestClient) -> None:
    assert ws_refusal(api) == 4401


def test_websocket_from_foreign_origin_is_refused(api: TestClient, tokens: dict[str, str]) -> None:
    headers = {**bearer(tokens["admin"]), "Origin": "http://evil.example"}
    assert ws_refusal(api, headers) == 4403


def test_login_sets_httponly_session_cookie_that_authenticates(
    api: TestClient, tokens: dict[str, str]
) -> None:
    response = api.post("/api/login", json={"token": tokens["admin"]})
    assert response.status_code == 200
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "samesite=lax" in cookie.lower()
    assert api.get("/api/me").json()["username"] == "admin"
    assert api.post("/api/logout").status_code == 204
    assert api.get("/api/me").status_code == 401


def test_node_token_cannot_submit_and_user_token_cannot_claim(
    api: TestClient, tokens: dict[str, str]
) -> None:
    spec = {"name": "x", "template": "mlp"}
    assert api.post("/api/jobs", json=spec, headers=bearer(tokens["node"])).status_code == 403
    claim = api.post("/api/attempts/1/claim", json={"node": "n"}, headers=bearer(tokens["alice"]))
    assert claim.status_code == 403


def test_cross_origin_cookie_write_is_refused(api: TestClient, tokens: dict[str, str]) -> None:
    api.post("/api/login", json={"token": tokens["admin"]})
    spec = {"name": "x", "template": "mlp"}
    response = api.post("/api/jobs", json=spec, headers={"Origin": "http://evil.example"})
    assert response.status_code == 403


def test_websocket_admits_a_configured_cors_origin_and_still_refuses_others(
    settings: Settings, tokens: dict[str, str]
) -> None:
    configured = settings.model_copy(update={"cors_origins": "http://dash.example"})
    with TestClient(create_app(configured)) as api:
        headers = {**bearer(tokens["admin"]), "Origin": "http://dash.example"}
        with api.websocket_connect("/api/ws", headers=headers) as ws:
            ws.send_json({"op": "subscribe", "topic": "jobs"})
            assert ws.receive_json()["type"] == "snapshot"
        foreign = {**bearer(tokens["admin"]), "Origin": "http://evil.example"}
        assert ws_refusal(api, foreign) == 4403
