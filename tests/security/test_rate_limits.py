"""Logins per address and submissions per token are rate-limited in Redis (429)."""

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
    """The app allowing 3 logins per address and 2 submissions per token each minute."""
    strict = settings.model_copy(update={"login_rate_limit": 3, "submit_rate_limit": 2})
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


def test_submissions_are_limited_per_token(limited: TestClient, two_users: dict[str, str]) -> None:
    alice, bob = bearer(two_users["alice"]), bearer(two_users["bob"])
    codes = [limited.post("/api/jobs", json=SPEC, headers=alice).status_code for _ in range(3)]
    assert codes == [201, 201, 429]
    assert limited.post("/api/jobs", json=SPEC, headers=bob).status_code == 201
    assert len(limited.get("/api/jobs", headers=alice).json()["jobs"]) == 2
    assert limited.get("/api/jobs", headers=alice).status_code == 200
