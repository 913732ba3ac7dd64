"""CSRF, DNS rebinding, websocket Origin, CORS and response headers."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from tests.backend.conftest import bearer, ws_refusal

SPEC = {"name": "x", "template": "mlp"}
EVIL = "http://evil.example"


def _logged_in(api: TestClient, token: str) -> TestClient:
    assert api.post("/api/login", json={"token": token}).status_code == 200
    return api


def test_cookie_writes_from_a_foreign_site_are_refused_and_write_nothing(
    api: TestClient, tokens: dict[str, str]
) -> None:
    _logged_in(api, tokens["alice"])
    foreign = api.post("/api/jobs", json=SPEC, headers={"Origin": EVIL})
    fetch_meta = api.post("/api/jobs", json=SPEC, headers={"Sec-Fetch-Site": "cross-site"})
    minted = api.post("/api/tokens", json={"scopes": ["read"]}, headers={"Origin": EVIL})
    assert (foreign.status_code, fetch_meta.status_code, minted.status_code) == (403, 403, 403)
    assert api.get("/api/jobs").json()["jobs"] == []
    same = api.post("/api/jobs", json=SPEC, headers={"Origin": "http://testserver"})
    assert same.status_code == 201


def test_login_from_a_foreign_origin_is_refused(api: TestClient, tokens: dict[str, str]) -> None:
    response = api.post("/api/login", json={"token": tokens["alice"]}, headers={"Origin": EVIL})
    assert response.status_code == 403 and "set-cookie" not in response.headers


def test_bearer_requests_are_not_subject_to_origin_checks(
    api: TestClient, tokens: dict[str, str]
) -> None:
    headers = {**bearer(tokens["alice"]), "Origin": EVIL}
    assert api.post("/api/jobs", json=SPEC, headers=headers).status_code == 201


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8000", "localhost.evil.example", ""]
)
def test_a_foreign_host_header_is_refused_dns_rebinding(api: TestClient, host: str) -> None:
    response = api.get("/api/health", headers={"Host": host})
    assert response.status_code == 400 and response.json() == {"detail": "unknown Host header"}


@pytest.mark.parametrize(
    "host", ["testserver", "127.0.0.1:8000", "[::1]:8000", "10.1.2.3", "LOCALHOST"]
)
def test_allowed_names_and_ip_literals_are_answered(api: TestClient, host: str) -> None:
    assert api.get("/api/health", headers={"Host": host}).status_code == 200


def test_websocket_to_a_foreign_host_is_refused(api: TestClient, tokens: dict[str, str]) -> None:
    headers = {**bearer(tokens["admin"]), "Host": "evil.example"}
    assert ws_refusal(api, headers) == 4400


def test_websocket_from_a_foreign_origin_is_refused_even_with_a_cookie(
    api: TestClient, tokens: dict[str, str]
) -> None:
    _logged_in(api, tokens["alice"])
    assert ws_refusal(api, {"Origin": EVIL}) == 4403
    with api.websocket_connect("/api/ws", headers={"Origin": "http://testserver"}) as ws:
        ws.send_json({"op": "subscribe", "topic": "jobs"})
        assert ws.receive_json()["type"] == "snapshot"


def test_cors_is_closed_by_default(api: TestClient, tokens: dict[str, str]) -> None:
    preflight = api.options(
        "/api/jobs", headers={"Origin": EVIL, "Access-Control-Request-Method": "POST"}
    )
    assert "access-control-allow-origin" not in preflight.headers
    simple = api.get("/api/jobs", headers={**bearer(tokens["alice"]), "Origin": EVIL})
    assert "access-control-allow-origin" not in simple.headers


def test_cors_admits_only_configured_origins(settings: Settings, tokens: dict[str, str]) -> None:
    ui = "https://ui.example"
    configured = settings.model_copy(update={"cors_origins": ui})
    with TestClient(create_app(configured)) as api:
        ok = api.options(
            "/api/jobs", headers={"Origin": ui, "Access-Control-Request-Method": "POST"}
        )
        assert ok.headers["access-control-allow-origin"] == ui
        bad = api.options(
            "/api/jobs", headers={"Origin": EVIL, "Access-Control-Request-Method": "POST"}
        )
        assert "access-control-allow-origin" not in bad.headers
        _logged_in(api, tokens["alice"])
        assert api.post("/api/jobs", json=SPEC, headers={"Origin": ui}).status_code == 201
        assert api.post("/api/jobs", json=SPEC, headers={"Origin": EVIL}).status_code == 403


def test_responses_carry_protective_headers(api: TestClient, tokens: dict[str, str]) -> None:
    response = api.post("/api/tokens", json={"scopes": ["read"]}, headers=bearer(tokens["alice"]))
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["cache-control"] == "no-store"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


def test_session_cookie_is_httponly_lax_and_secure_when_configured(
    settings: Settings, tokens: dict[str, str], tmp_path: Path
) -> None:
    secure = settings.model_copy(update={"cookie_secure": True})
    with TestClient(create_app(secure), base_url="https://testserver") as api:
        cookie = api.post("/api/login", json={"token": tokens["alice"]}).headers["set-cookie"]
    assert "HttpOnly" in cookie and "Secure" in cookie and "samesite=lax" in cookie.lower()
