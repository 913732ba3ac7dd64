"""Failed logins per address, submissions (clones too) and token mints per user: 429 in Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from tests.backend.conftest import bearer
from tests.backend.test_sweeps_api import sweep_body

SPEC = {"name": "x", "template": "mlp"}


@pytest.fixture
def limited(settings: Settings, two_users: dict[str, str]) -> Iterator[TestClient]:
    """The app allowing 3 logins per address, 2 submissions and 2 mints per user each minute."""
    strict = settings.model_copy(
        update={"login_rate_limit": 3, "submit_rate_limit": 2, "token_rate_limit": 2}
    )
    with TestClient(create_app(strict)) as client:
        yield client


@pytest.fixture
def loopback(settings: Settings, two_users: dict[str, str]) -> Iterator[TestClient]:
    """The app, 3 failed logins per address a minute, every caller on 127.0.0.1: a job on
    the API host and every loopback client (a local proxy's users too) share the address."""
    strict = settings.model_copy(update={"login_rate_limit": 3})
    with TestClient(create_app(strict), client=("127.0.0.1", 5000)) as client:
        yield client


def test_a_flood_of_bad_logins_is_limited_yet_a_valid_token_still_logs_in(
    loopback: TestClient, two_users: dict[str, str]
) -> None:
    # before #30: the 4th login from the address got 429, the right token included
    wrong = [loopback.post("/api/login", json={"token": f"tb_guess{i}"}) for i in range(6)]
    assert [r.status_code for r in wrong] == [401, 401, 401, 429, 429, 429]
    assert int(wrong[-1].headers["retry-after"]) > 0 and "set-cookie" not in wrong[-1].headers
    right = loopback.post("/api/login", json={"token": two_users["alice"]})
    assert right.status_code == 200 and "set-cookie" in right.headers
    assert right.json()["username"] == "alice"
    # the flood goes on being refused, and another right token still gets in
    assert loopback.post("/api/login", json={"token": "tb_guess9"}).status_code == 429
    assert loopback.post("/api/login", json={"token": two_users["bob"]}).status_code == 200


def test_password_guesses_stop_per_user_name_and_spare_everyone_else(
    loopback: TestClient, two_users: dict[str, str]
) -> None:
    admin = bearer(two_users["admin"])
    for name in ("carol", "dave"):
        body = {"username": name, "password": f"{name}-password-1"}
        assert loopback.post("/api/users", json=body, headers=admin).status_code == 201
    guesses = [
        loopback.post("/api/login", json={"username": "carol", "password": f"guess-{i}"})
        for i in range(5)
    ]
    assert [r.status_code for r in guesses] == [401, 401, 401, 429, 429]
    # carol's right password from this address waits for the window: guesses stay unchecked
    right = {"username": "carol", "password": "carol-password-1"}
    assert loopback.post("/api/login", json=right).status_code == 429
    dave = {"username": "dave", "password": "dave-password-1"}
    assert loopback.post("/api/login", json=dave).status_code == 200
    assert loopback.post("/api/login", json={"token": two_users["alice"]}).status_code == 200


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


@pytest.fixture
def budget(settings: Settings, two_users: dict[str, str]) -> Iterator[TestClient]:
    """The app allowing 5 submissions (sweep trials each count) and 2 webhooks per user a
    minute; webhooks may name the loopback receiver that is never called here."""
    strict = settings.model_copy(
        update={"submit_rate_limit": 5, "webhook_rate_limit": 2, "webhook_allowed_hosts": "*"}
    )
    with TestClient(create_app(strict)) as client:
        yield client


def test_each_trial_of_a_sweep_counts_as_a_submission_and_an_oversized_sweep_is_refused_whole(
    budget: TestClient, two_users: dict[str, str]
) -> None:
    alice = bearer(two_users["alice"])
    # before #30: a sweep counted as one submission however many jobs it made (up to 256)
    four = sweep_body(parameters={"hyperparameters.lr": {"values": [0.1, 0.05, 0.02, 0.01]}})
    assert budget.post("/api/sweeps", json=four, headers=alice).status_code == 201
    refused = budget.post("/api/sweeps", json=four, headers=alice)
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) > 0
    assert refused.json()["detail"] == (
        "too many submissions (each sweep trial is one): at most 5 per 60 s; "
        "this one is 4, 1 left in this window"
    )
    assert len(budget.get("/api/sweeps", headers=alice).json()["sweeps"]) == 1  # nothing made
    # the refused sweep spent nothing: the one submission left is still there
    assert budget.post("/api/jobs", json=SPEC, headers=alice).status_code == 201
    assert budget.post("/api/jobs", json=SPEC, headers=alice).status_code == 429


def test_webhook_creation_is_limited_per_user(
    budget: TestClient, two_users: dict[str, str]
) -> None:
    alice, bob = bearer(two_users["alice"]), bearer(two_users["bob"])
    hook = {"url": "https://hooks.example.com/x"}
    codes = [budget.post("/api/webhooks", json=hook, headers=alice).status_code for _ in range(3)]
    assert codes == [201, 201, 429]
    assert budget.post("/api/webhooks", json=hook, headers=bob).status_code == 201
    assert len(budget.get("/api/webhooks", headers=alice).json()) == 2
