"""CLI verbs for identity: `trainboard user ...` and `trainboard token ...` (through the API)."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from backend.cli.base import app, connect, fail

user_app = typer.Typer(no_args_is_help=True, help="Users (admins only).")
token_app = typer.Typer(no_args_is_help=True, help="Your API tokens: scoped, shown once.")
app.add_typer(user_app, name="user")
app.add_typer(token_app, name="token")
ScopeOption = Annotated[
    list[str],
    typer.Option("--scope", help="read, submit, admin or node (repeat for several)"),
]


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    value: str = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    return value


@user_app.command("add")
def user_add(
    ctx: typer.Context,
    username: Annotated[str, typer.Argument(help="letters, digits and _.-")],
    role: Annotated[str, typer.Option(help="user or admin")] = "user",
    password_stdin: Annotated[bool, typer.Option(help="read the password from stdin")] = False,
) -> None:
    """Create a user with a password (asked for twice, never echoed)."""
    if role not in ("user", "admin"):
        fail("--role must be user or admin")
    body = {"username": username, "password": _password(password_stdin), "role": role}
    user = connect(ctx).call("POST", "/api/users", json=body)
    typer.echo(f"user {user['id']} {user['username']} ({user['role']}) created")


@user_app.command("passwd")
def user_passwd(
    ctx: typer.Context,
    username: str,
    password_stdin: Annotated[bool, typer.Option(help="read the password from stdin")] = False,
) -> None:
    """Set a user's password; their browser sessions end."""
    client = connect(ctx)
    ids = {u["username"]: u["id"] for u in client.call("GET", "/api/users")}
    if username not in ids:
        fail(f"no user named {username!r}")
    body = {"password": _password(password_stdin)}
    client.call("PUT", f"/api/users/{ids[username]}/password", json=body)
    typer.echo(f"password of {username} changed; their sessions ended")


@user_app.command("ls")
def user_ls(ctx: typer.Context) -> None:
    """List users."""
    for user in connect(ctx).call("GET", "/api/users"):
        typer.echo(f"{user['id']:>5}  {user['role']:<6} {user['username']}")


@token_app.command("create")
def token_create(
    ctx: typer.Context,
    scope: ScopeOption = ["read", "submit"],  # noqa: B006 (typer reads the default, never mutates)
    expires_in: Annotated[
        int | None, typer.Option(min=60, help="seconds until the token expires")
    ] = None,
    name: Annotated[str, typer.Option(help="a label to recognise it by")] = "",
    node: Annotated[
        str | None, typer.Option(help="node tokens (required): the one node it may act as")
    ] = None,
) -> None:
    """Mint a token with scopes you hold (node: admins only, bound to --node); prints it once."""
    body: dict[str, Any] = {"scopes": scope, "name": name}
    if expires_in:
        body["expires_in"] = expires_in
    if node is not None:
        body["node"] = node
    made = connect(ctx).call("POST", "/api/tokens", json=body)
    expiry = made["expires_at"] or "never"
    bound = f", node {made['node']}" if made.get("node") else ""
    scopes = ",".join(made["scopes"])
    typer.echo(f"token {made['id']} ({scopes}{bound}, expires {expiry}):", err=True)
    typer.echo(made["token"])


@token_app.command("ls")
def token_ls(ctx: typer.Context) -> None:
    """List your tokens (never their secrets)."""
    for made in connect(ctx).call("GET", "/api/tokens"):
        state = "revoked" if made["revoked_at"] else f"expires {made['expires_at'] or 'never'}"
        scopes = ",".join(made["scopes"]) + (f"@{made['node']}" if made.get("node") else "")
        typer.echo(f"{made['id']:>5}  {made['prefix']}…  {scopes:<18} {state:<34} {made['name']}")


@token_app.command("revoke")
def token_revoke(ctx: typer.Context, token_id: Annotated[int, typer.Argument(min=1)]) -> None:
    """Revoke a token (yours; an admin: anyone's)."""
    connect(ctx).call("DELETE", f"/api/tokens/{token_id}")
    typer.echo(f"token {token_id} revoked")
