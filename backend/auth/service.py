"""Issuing and checking secrets: API tokens, node tokens and browser sessions."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from backend.auth.models import ApiToken, User
from backend.db import as_utc, utcnow

USER_SCOPES = frozenset({"read", "submit", "admin"})
ADMIN_SCOPES = "read,submit,admin"
LAUNCH_TOKEN_NAME = "printed at start"
EMBEDDED_NODE_TOKEN_NAME = "embedded worker"


@dataclass(frozen=True)
class Principal:
    """Who is calling, and with which scopes."""

    user_id: int
    username: str
    role: str
    scopes: frozenset[str]
    token_id: int
    kind: str
    node: str | None = None  # a node token: the one node it may act as

    @property
    def is_admin(self) -> bool:
        return self.role == "admin" and "admin" in self.scopes


class Owned(Protocol):
    """A row that belongs to one user (a job, a sweep, a webhook)."""

    @property
    def owner_id(self) -> int: ...


OwnedRow = TypeVar("OwnedRow", bound=Owned)


def visible_or_raise(
    session: Session,
    model: type[OwnedRow],
    row_id: int,
    *,
    principal: Principal,
    missing: LookupError,
) -> OwnedRow:
    """The row if the caller may see it (its own; any, for an admin); otherwise raise `missing`,
    the same whether the row does not exist or is another's (never a hint it exists)."""
    row = session.get(model, row_id)
    if row is None or not (principal.is_admin or row.owner_id == principal.user_id):
        raise missing
    return row


def hash_secret(secret: str) -> str:
    """SHA-256 of a high-entropy secret (tokens are random, so no slow hash is needed)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret() -> str:
    return "tb_" + secrets.token_urlsafe(32)


def issue_token(
    session: Session,
    *,
    user: User,
    scopes: str,
    kind: str = "api",
    name: str = "",
    expires_at: datetime | None = None,
    secret: str | None = None,
    node: str | None = None,
) -> tuple[ApiToken, str]:
    """Store a new token (hashed) and return it with its secret, which is shown once."""
    secret = secret or new_secret()
    token = ApiToken(
        user_id=user.id,
        token_hash=hash_secret(secret),
        prefix=secret[:8],
        kind=kind,
        name=name,
        scopes=scopes,
        expires_at=expires_at,
        node_name=node,
    )
    session.add(token)
    session.flush()
    return token, secret


def authenticate(session: Session, secret: str) -> Principal | None:
    """The principal a secret belongs to, or None when unknown, revoked or expired."""
    if not secret or len(secret) > 256:
        return None
    row = session.execute(
        select(ApiToken, User)
        .join(User, User.id == ApiToken.user_id)
        .where(ApiToken.token_hash == hash_secret(secret))
    ).first()
    if row is None:
        return None
    token, user = row
    now = utcnow()
    if token.revoked_at is not None or (token.expires_at and as_utc(token.expires_at) <= now):
        return None
    return Principal(
        user_id=user.id,
        username=user.username,
        role=user.role,
        scopes=frozenset(token.scopes.split(",")),
        token_id=token.id,
        kind=token.kind,
        node=token.node_name,
    )


def revoke(session: Session, *, token_id: int) -> None:
    session.execute(update(ApiToken).where(ApiToken.id == token_id).values(revoked_at=utcnow()))


def start_session(session: Session, *, principal: Principal, days: float) -> str:
    """A browser session secret with the scopes of the token used to log in (never node)."""
    user = session.get_one(User, principal.user_id)
    scopes = ",".join(sorted(principal.scopes & USER_SCOPES))
    _, secret = issue_token(
        session,
        user=user,
        scopes=scopes,
        kind="session",
        name="browser session",
        expires_at=utcnow() + timedelta(days=days),
    )
    return secret


def ensure_admin(session: Session) -> User:
    """The first admin user, created on first start."""
    admin = session.scalars(select(User).where(User.role == "admin").order_by(User.id)).first()
    if admin is None:
        admin = User(username="admin", role="admin")
        session.add(admin)
        session.flush()
    return admin


def bootstrap_admin_token(session: Session, *, configured: str | None) -> str:
    """Make the admin login token valid: the configured one, or a fresh one replacing the last."""
    admin = ensure_admin(session)
    if configured is not None:
        if authenticate(session, configured) is None:
            issue_token(
                session, user=admin, scopes=ADMIN_SCOPES, name="configured", secret=configured
            )
        return configured
    _revoke_named(session, user=admin, name=LAUNCH_TOKEN_NAME)
    _, secret = issue_token(session, user=admin, scopes=ADMIN_SCOPES, name=LAUNCH_TOKEN_NAME)
    return secret


def bootstrap_node_token(session: Session, *, node: str) -> str:
    """A fresh node token for the embedded worker, bound to its node (revokes the last one)."""
    admin = ensure_admin(session)
    _revoke_named(session, user=admin, name=EMBEDDED_NODE_TOKEN_NAME)
    _, secret = issue_token(
        session, user=admin, scopes="node", name=EMBEDDED_NODE_TOKEN_NAME, node=node
    )
    return secret


def _revoke_named(session: Session, *, user: User, name: str) -> None:
    session.execute(
        update(ApiToken)
        .where(ApiToken.user_id == user.id, ApiToken.name == name, ApiToken.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )
