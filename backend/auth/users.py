"""Users: creation by an admin, password login, password reset."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from backend.auth.models import ApiToken, User
from backend.auth.passwords import hash_password, needs_rehash, verify_password
from backend.auth.service import ADMIN_SCOPES, Principal
from backend.db import utcnow

ROLE_SCOPES = {"admin": ADMIN_SCOPES, "user": "read,submit"}


class UserExists(ValueError):
    """The username is taken."""


class UserNotFound(LookupError):
    pass


def create_user(session: Session, *, username: str, password: str, role: str) -> User:
    """A new user with an argon2-hashed password; UserExists when the name is taken."""
    taken = session.scalars(select(User.id).where(User.username == username)).first()
    if taken is not None:
        raise UserExists(f"user {username!r} already exists")
    user = User(username=username, role=role, password_hash=hash_password(password))
    session.add(user)
    session.flush()
    return user


def list_users(session: Session) -> Sequence[User]:
    return session.scalars(select(User).order_by(User.id)).all()


def set_password(session: Session, *, user_id: int, password: str) -> User:
    """Replace a user's password and end their browser sessions."""
    user = session.get(User, user_id)
    if user is None:
        raise UserNotFound(f"user {user_id} not found")
    user.password_hash = hash_password(password)
    session.execute(
        update(ApiToken)
        .where(
            ApiToken.user_id == user.id, ApiToken.kind == "session", ApiToken.revoked_at.is_(None)
        )
        .values(revoked_at=utcnow())
    )
    return user


def password_login(session: Session, *, username: str, password: str) -> Principal | None:
    """The principal a username and password stand for (its role's scopes), or None."""
    user = session.scalars(select(User).where(User.username == username)).first()
    if not verify_password(user.password_hash if user else None, password) or user is None:
        return None
    if user.password_hash and needs_rehash(user.password_hash):
        user.password_hash = hash_password(password)
    return Principal(
        user_id=user.id,
        username=user.username,
        role=user.role,
        scopes=frozenset(ROLE_SCOPES.get(user.role, "read").split(",")),
        token_id=0,
        kind="password",
    )
