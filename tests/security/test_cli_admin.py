"""`trainboard user ...` and `trainboard token ...` against the API in-process."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from backend.cli import client as cli_client
from backend.cli.main import app as cli
from tests.backend.conftest import bearer

PASSWORD = "a long enough passphrase"


@pytest.fixture
def run(api: TestClient, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run a CLI command whose HTTP calls reach the test app."""

    def in_process(base_url: str, headers: dict[str, str], timeout: float) -> httpx.Client:
        return TestClient(api.app, headers=headers)

    monkeypatch.setattr(cli_client.httpx, "Client", in_process)

    def invoke(token: str, *args: str, stdin: str | None = None) -> Any:
        return CliRunner().invoke(cli, ["--token", token, *args], input=stdin)

    return invoke


def test_admin_adds_a_user_who_can_then_log_in(
    run: Any, api: TestClient, tokens: dict[str, str]
) -> None:
    added = run(tokens["admin"], "user", "add", "carol", "--password-stdin", stdin=PASSWORD + "\n")
    assert added.exit_code == 0, added.output
    assert "carol (user) created" in added.output
    login = api.post("/api/login", json={"username": "carol", "password": PASSWORD})
    assert login.status_code == 200
    listed = run(tokens["admin"], "user", "ls")
    assert "carol" in listed.output and "alice" in listed.output
    changed = run(tokens["admin"], "user", "passwd", "carol", "--password-stdin", stdin="x" * 12)
    assert changed.exit_code == 0, changed.output
    assert api.get("/api/me").status_code == 401


def test_a_user_cannot_add_users_and_is_told_why(run: Any, tokens: dict[str, str]) -> None:
    refused = run(tokens["alice"], "user", "add", "eve", "--password-stdin", stdin=PASSWORD)
    assert refused.exit_code == 2 and "needs the 'admin' scope" in refused.output


def test_token_create_prints_the_secret_once_and_revoke_ends_it(
    run: Any, api: TestClient, tokens: dict[str, str]
) -> None:
    made = run(
        tokens["alice"],
        "token",
        "create",
        "--scope",
        "read",
        "--expires-in",
        "3600",
        "--name",
        "ci",
    )
    assert made.exit_code == 0, made.output
    secret = made.stdout.strip().splitlines()[-1]
    assert secret.startswith("tb_")
    assert api.get("/api/me", headers=bearer(secret)).json()["scopes"] == ["read"]
    listed = run(tokens["alice"], "token", "ls")
    assert "ci" in listed.output and secret not in listed.output
    token_id = api.get("/api/tokens", headers=bearer(tokens["alice"])).json()[0]["id"]
    assert run(tokens["alice"], "token", "revoke", str(token_id)).exit_code == 0
    assert api.get("/api/me", headers=bearer(secret)).status_code == 401


def test_only_admins_create_node_tokens(run: Any, tokens: dict[str, str]) -> None:
    refused = run(tokens["alice"], "token", "create", "--scope", "node")
    assert refused.exit_code == 2 and "only an admin" in refused.output
    unbound = run(tokens["admin"], "token", "create", "--scope", "node", "--name", "gpu-0")
    assert unbound.exit_code == 2 and "bound to one node" in unbound.output
    made = run(
        tokens["admin"], "token", "create", "--scope", "node", "--name", "gpu-0", "--node", "gpu-0"
    )
    assert made.exit_code == 0 and made.stdout.strip().splitlines()[-1].startswith("tb_")
    assert "node gpu-0" in made.stderr
