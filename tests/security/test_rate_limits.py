"""Logins per address, submissions (clones too) and token mints per user: 429 in Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from tests.backend.conftest import bearer

SPEC = {"name": "x", "template": "mlp"}


@pytest.fixture
def limited(settings: Settings, two_users: dict[str, str]) -> Iterator[TestClient]:
    """The app allowing 3 logins per address, 2 submissions and 2 mints per user each minute."""
    strict = settings.model_copy(
        update={"login_rate_limit": 3, "submit_rate_limit": 2, "token_rate_limit": 2}
    )
    with TestClient(create_app(strict)) as client:
        yield client


def test_logins_beyond_the_limit_get_429_even_with_the_right_token(
    limited: TestClient, two_users: dict[str, str]
) -> None:
    wrong = [limited.post("/api/login", json={"token": f"tb_guess{i}"}) for i in range(3)]
    assert [r.status_code for r in wrong] == [401, 401, 401]
    refused = limited.post("/api/login", json={"token": two_users["alice"]})
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) > 0
    assert "set-cookie" not in refused.headers


def test_submissions_are_limited_per_user(limited: TestClient, two_users: dict[str, str]) -> None:
    alice, bob = bearer(two_users["alice"]), bearer(two_users["bob"])
    codes = [limited.post("/api/jobs", json=SPEC, headers=alice).status_code for _ in range(3)]
    assert codes == [201, 201, 429]
    assert limited.post("/api/jobs", json=SPEC, headers=bob).status_code == 201
    assert len(limited.get("/api/jobs", headers=alice).json()["jobs"]) == 2
    assert limited.get("/api/jobs", headers=alice).status_code == 200


def test_a_clone_counts_as_a_submission(limited: TestClient, two_users: dict[str, str]) -> None:
    alice = bearer(two_users["alice"])
    parent = limited.post("/api/jobs", json=SPEC, headers=alice).json()["id"]
    assert limited.post(f"/api/jobs/{parent}/clone", json={}, headers=alice).status_code == 201
    refused = limited.post(f"/api/jobs/{parent}/clone", json={}, headers=alice)
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) > 0
    assert limited.post("/api/jobs", json=SPEC, headers=alice).status_code == 429
    assert len(limited.get("/api/jobs", headers=alice).json()["jobs"]) == 2


def test_token_mints_are_limited_and_a_new_token_gets_no_fresh_allowance(
    limited: TestClient, two_users: dict[str, str]
) -> None:
    alice = bearer(two_users["alice"])
    minted = [
        limited.post("/api/tokens", json={"scopes": ["read", "submit"]}, headers=alice)
        for _ in range(2)
    ]
    assert [r.status_code for r in minted] == [201, 201]
    fresh = bearer(minted[0].json()["token"])
    refused = limited.post("/api/tokens", json={"scopes": ["read"]}, headers=fresh)
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) > 0
    bob = limited.post("/api/tokens", json={"scopes": ["read"]}, headers=bearer(two_users["bob"]))
    assert bob.status_code == 201
    mine = limited.get("/api/tokens", headers=alice).json()
    assert len(mine) == 3  # alice's own and the two minted


def test_submissions_through_several_tokens_share_the_users_limit(
    limited: TestClient, two_users: dict[str, str]
) -> None:
    alice = bearer(two_users["alice"])
    other = limited.post("/api/tokens", json={"scopes": ["read", "submit"]}, headers=alice)
    assert limited.post("/api/jobs", json=SPEC, headers=alice).status_code == 201
    second = bearer(other.json()["token"])
    assert limited.post("/api/jobs", json=SPEC, headers=second).status_code == 201
    assert limited.post("/api/jobs", json=SPEC, headers=second).status_code == 429


def _logins_from(api: TestClient, forwarded: list[str]) -> list[int]:
    return [
        api.post(
            "/api/login", json={"token": "tb_guess"}, headers={"X-Forwarded-For": hop}
        ).status_code
        for hop in forwarded
    ]


def test_x_forwarded_for_is_ignored_without_a_configured_proxy(
    settings: Settings, two_users: dict[str, str]
) -> None:
    strict = settings.model_copy(update={"login_rate_limit": 2})
    with TestClient(create_app(strict), client=("127.0.0.1", 5000)) as api:
        codes = _logins_from(api, ["203.0.113.1", "203.0.113.2", "203.0.113.3"])
    assert codes == [401, 401, 429]


def test_x_forwarded_for_counts_the_client_behind_a_trusted_proxy(
    settings: Settings, two_users: dict[str, str]
) -> None:
    strict = settings.model_copy(
        update={"login_rate_limit": 2, "trusted_proxies": "10.0.0.0/8, 192.0.2.7"}
    )
    with TestClient(create_app(strict), client=("10.1.2.3", 5000)) as api:
        # each client has its own allowance, whatever it wrote to the left of the proxy's entry
        assert _logins_from(api, ["1.1.1.1, 198.51.100.1"] * 3) == [401, 401, 429]
        assert _logins_from(api, ["198.51.100.2, 192.0.2.7"] * 2) == [401, 401]
        spoofed = ["9.9.9.9, 198.51.100.2, 192.0.2.7", "8.8.8.8, 198.51.100.2"]
        assert _logins_from(api, spoofed) == [429, 429]
    with TestClient(create_app(strict), client=("198.51.100.9", 5000)) as api:
        # a peer that is not a trusted proxy: its header is ignored
        assert _logins_from(api, ["203.0.113.1", "203.0.113.2", "203.0.113.3"]) == [401, 401, 429]


def test_a_malformed_trusted_proxy_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="not an IP or CIDR"):
        Settings(trusted_proxies="10.0.0.0/8,proxy.example")
