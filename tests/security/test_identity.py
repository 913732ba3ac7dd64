"""Users with argon2 passwords; scoped, expiring, revocable API tokens shown once."""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import select, update

from backend.auth.models import ApiToken, User
from backend.db import Database, utcnow
from tests.backend.conftest import bearer
from workers.contract.protocol import NodeDevice, NodeRegistration

PASSWORD = "correct horse battery"
SPEC = {"name": "x", "template": "mlp"}


def _add_user(api: TestClient, admin: str, name: str = "carol", role: str = "user") -> int:
    body = {"username": name, "password": PASSWORD, "role": role}
    created = api.post("/api/users", json=body, headers=bearer(admin))
    assert created.status_code == 201, created.text
    return int(created.json()["id"])


def test_admin_creates_users_whose_passwords_are_stored_as_argon2(
    api: TestClient, tokens: dict[str, str], database: Database
) -> None:
    _add_user(api, tokens["admin"])
    with database.session() as session:
        stored = session.scalars(select(User.password_hash).where(User.username == "carol")).one()
    assert stored is not None and stored.startswith("$argon2id$") and PASSWORD not in stored
    again = api.post(
        "/api/users",
        json={"username": "carol", "password": PASSWORD},
        headers=bearer(tokens["admin"]),
    )
    assert again.status_code == 409
    names = [u["username"] for u in api.get("/api/users", headers=bearer(tokens["admin"])).json()]
    assert names == ["admin", "alice", "carol"]


def test_only_admins_manage_users(api: TestClient, tokens: dict[str, str]) -> None:
    body = {"username": "mallory", "password": PASSWORD, "role": "admin"}
    assert api.post("/api/users", json=body, headers=bearer(tokens["alice"])).status_code == 403
    assert api.get("/api/users", headers=bearer(tokens["alice"])).status_code == 403
    assert api.post("/api/users", json=body, headers=bearer(tokens["node"])).status_code == 403
    reset = api.put(
        "/api/users/1/password", json={"password": PASSWORD}, headers=bearer(tokens["alice"])
    )
    assert reset.status_code == 403


def test_password_login_gives_a_session_with_the_roles_scopes(
    api: TestClient, tokens: dict[str, str]
) -> None:
    _add_user(api, tokens["admin"])
    wrong = api.post("/api/login", json={"username": "carol", "password": "not it at all"})
    unknown = api.post("/api/login", json={"username": "nobody", "password": PASSWORD})
    assert (wrong.status_code, unknown.status_code) == (401, 401)
    assert wrong.json() == unknown.json()
    me = api.post("/api/login", json={"username": "carol", "password": PASSWORD})
    assert me.status_code == 200 and me.json()["scopes"] == ["read", "submit"]
    assert api.get("/api/me").json()["username"] == "carol"
    assert api.get("/api/users").status_code == 403


def test_password_reset_ends_the_users_sessions(api: TestClient, tokens: dict[str, str]) -> None:
    carol = _add_user(api, tokens["admin"])
    api.post("/api/login", json={"username": "carol", "password": PASSWORD})
    new = {"password": "a different passphrase"}
    reset = api.put(f"/api/users/{carol}/password", json=new, headers=bearer(tokens["admin"]))
    assert reset.status_code == 204
    assert api.get("/api/me").status_code == 401
    old = api.post("/api/login", json={"username": "carol", "password": PASSWORD})
    assert old.status_code == 401
    assert api.post("/api/login", json={"username": "carol", **new}).status_code == 200


def test_login_needs_exactly_one_kind_of_credential(
    api: TestClient, tokens: dict[str, str]
) -> None:
    for body in ({}, {"username": "admin"}, {"token": tokens["admin"], "username": "admin"}):
        assert api.post("/api/login", json=body).status_code == 422, body


def test_token_is_shown_once_listed_without_secret_and_works(
    api: TestClient, tokens: dict[str, str], database: Database
) -> None:
    alice = bearer(tokens["alice"])
    made = api.post("/api/tokens", json={"scopes": ["read"], "name": "ci"}, headers=alice)
    assert made.status_code == 201
    secret = made.json()["token"]
    listed = api.get("/api/tokens", headers=alice).json()
    assert [t["name"] for t in listed] == ["ci", ""] and secret not in str(listed)
    assert all("token" not in t for t in listed)
    with database.session() as session:
        assert (
            session.scalars(select(ApiToken).where(ApiToken.token_hash == secret)).first() is None
        )
    assert api.get("/api/me", headers=bearer(secret)).json()["scopes"] == ["read"]
    assert api.post("/api/jobs", json=SPEC, headers=bearer(secret)).status_code == 403


def test_a_caller_grants_only_scopes_it_holds(api: TestClient, tokens: dict[str, str]) -> None:
    alice = bearer(tokens["alice"])
    for scopes in (["admin"], ["node"], ["read", "admin"]):
        made = api.post("/api/tokens", json={"scopes": scopes}, headers=alice)
        assert made.status_code == 403, scopes
    reader = api.post("/api/tokens", json={"scopes": ["read"]}, headers=alice).json()["token"]
    wider = api.post("/api/tokens", json={"scopes": ["submit"]}, headers=bearer(reader))
    assert wider.status_code == 403
    mixed = api.post(
        "/api/tokens", json={"scopes": ["node", "read"]}, headers=bearer(tokens["admin"])
    )
    assert mixed.status_code == 403
    bad = api.post("/api/tokens", json={"scopes": ["root"]}, headers=alice)
    assert bad.status_code == 422


def test_expired_and_revoked_tokens_stop_working(
    api: TestClient, tokens: dict[str, str], database: Database
) -> None:
    alice = bearer(tokens["alice"])
    made = api.post("/api/tokens", json={"scopes": ["read"], "expires_in": 3600}, headers=alice)
    expiring = made.json()
    assert expiring["expires_at"] is not None
    assert api.get("/api/me", headers=bearer(expiring["token"])).status_code == 200
    with database.session() as session:
        session.execute(
            update(ApiToken)
            .where(ApiToken.id == expiring["id"])
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
    assert api.get("/api/me", headers=bearer(expiring["token"])).status_code == 401
    other = api.post("/api/tokens", json={"scopes": ["read"]}, headers=alice).json()
    assert api.delete(f"/api/tokens/{other['id']}", headers=alice).status_code == 204
    assert api.get("/api/me", headers=bearer(other["token"])).status_code == 401
    revoked = next(
        t for t in api.get("/api/tokens", headers=alice).json() if t["id"] == other["id"]
    )
    assert revoked["revoked_at"] is not None


def test_only_the_owner_or_an_admin_revokes_a_token(
    api: TestClient, two_users: dict[str, str]
) -> None:
    made = api.post("/api/tokens", json={"scopes": ["read"]}, headers=bearer(two_users["alice"]))
    token = made.json()
    assert (
        api.delete(f"/api/tokens/{token['id']}", headers=bearer(two_users["bob"])).status_code
        == 404
    )
    assert api.get("/api/me", headers=bearer(token["token"])).status_code == 200
    by_admin = api.delete(f"/api/tokens/{token['id']}", headers=bearer(two_users["admin"]))
    assert by_admin.status_code == 204
    assert api.get("/api/me", headers=bearer(token["token"])).status_code == 401


def test_minted_node_token_registers_nodes_and_cannot_submit_or_log_in(
    api: TestClient, tokens: dict[str, str]
) -> None:
    body = {"scopes": ["node"], "node": "n9"}
    made = api.post("/api/tokens", json=body, headers=bearer(tokens["admin"]))
    assert made.status_code == 201 and made.json()["node"] == "n9"
    node = bearer(made.json()["token"])
    registration = NodeRegistration(
        name="n9",
        hostname="h",
        address="127.0.0.1",
        devices=[NodeDevice(index=0, kind="cpu", name="c")],
    ).model_dump()
    assert api.post("/api/nodes/register", json=registration, headers=node).status_code == 200
    assert api.post("/api/jobs", json=SPEC, headers=node).status_code == 403
    assert api.get("/api/jobs", headers=node).status_code == 403
    assert api.post("/api/tokens", json=body, headers=node).status_code == 403
    assert api.post("/api/login", json={"token": made.json()["token"]}).status_code == 401
    as_user = api.post("/api/nodes/register", json=registration, headers=bearer(tokens["alice"]))
    assert as_user.status_code == 403
    heartbeat = api.post("/api/nodes/n9/heartbeat", json={}, headers=bearer(tokens["alice"]))
    finish = api.post(
        "/api/attempts/1/finish", json={"outcome": "failed"}, headers=bearer(tokens["alice"])
    )
    assert (heartbeat.status_code, finish.status_code) == (403, 403)
