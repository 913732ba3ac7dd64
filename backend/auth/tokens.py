"""API tokens a caller mints, lists and revokes: scoped, optionally expiring, shown once."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.auth.models import ApiToken, User
from backend.auth.service import Principal, issue_token
from backend.db import utcnow


class ScopeRefused(PermissionError):
    """The caller asked for a scope it may not grant."""


class TokenNotFound(LookupError):
    pass


class NodeNameRequired(ValueError):
    """A node token must name the one node it may act as."""


def grantable(principal: Principal, scopes: Iterable[str], *, node: str | None = None) -> str:
    """The scopes as stored, if the caller may grant them; else ScopeRefused."""
    wanted = sorted(set(scopes))
    if "node" in wanted:
        if not principal.is_admin:
            raise ScopeRefused("only an admin may create node tokens")
        if wanted != ["node"]:
            raise ScopeRefused("a node token carries the node scope alone")
        if not node:
            raise NodeNameRequired("a node token is bound to one node: name it (node / --node)")
        return "node"
    if node is not None:
        raise NodeNameRequired("only a node token names a node")
    missing = [s for s in wanted if s not in principal.scopes]
    if missing:
        raise ScopeRefused(f"you cannot grant scopes you do not hold: {', '.join(missing)}")
    return ",".join(wanted)


def mint(
    session: Session,
    *,
    principal: Principal,
    scopes: Iterable[str],
    name: str = "",
    expires_in: int | None = None,
    node: str | None = None,
) -> tuple[ApiToken, str]:
    """A new API token of the caller's own (a node token bound to `node`), shown once."""
    stored = grantable(principal, scopes, node=node)
    user = session.get_one(User, principal.user_id)
    expires_at = utcnow() + timedelta(seconds=expires_in) if expires_in else None
    return issue_token(
        session, user=user, scopes=stored, name=name, expires_at=expires_at, node=node
    )


def list_tokens(session: Session, *, user_id: int, limit: int = 500) -> Sequence[ApiToken]:
    """A user's API tokens (not browser sessions), newest first."""
    return session.scalars(
        select(ApiToken)
        .where(ApiToken.user_id == user_id, ApiToken.kind == "api")
        .order_by(ApiToken.id.desc())
        .limit(limit)
    ).all()


def revoke_token(session: Session, *, principal: Principal, token_id: int) -> ApiToken:
    """Revoke one of the caller's tokens (an admin: anyone's); TokenNotFound otherwise."""
    token = session.get(ApiToken, token_id)
    if token is None or not (principal.is_admin or token.user_id == principal.user_id):
        raise TokenNotFound(f"token {token_id} not found")
    if token.revoked_at is None:
        token.revoked_at = utcnow()
    return token
