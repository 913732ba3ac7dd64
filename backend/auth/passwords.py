"""Password hashing with argon2id; a login for an unknown user costs as much as a real one."""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_HASHER = PasswordHasher()
#: verified against when the user does not exist, so timing does not reveal usernames
_DUMMY_HASH = _HASHER.hash("trainboard-no-such-user")


def hash_password(password: str) -> str:
    """An argon2id hash (salted, with its parameters) of password."""
    return _HASHER.hash(password)


def verify_password(stored: str | None, password: str) -> bool:
    """Whether password matches the stored hash; False for a user without a password."""
    try:
        return _HASHER.verify(stored or _DUMMY_HASH, password) and stored is not None
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(stored: str) -> bool:
    """Whether the hash was made with weaker parameters than today's."""
    return _HASHER.check_needs_rehash(stored)
