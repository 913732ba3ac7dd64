"""Fixtures for the security tests: the API fixtures plus a second plain user."""

from __future__ import annotations

import pytest

from backend.auth.models import User
from backend.auth.service import issue_token
from backend.db import Database
from tests.backend.conftest import api, database, module_api, settings, tokens  # noqa: F401


@pytest.fixture
def two_users(database: Database, tokens: dict[str, str]) -> dict[str, str]:  # noqa: F811
    """Tokens (read, submit) of two plain users, alice and bob, and the admin's and node's."""
    with database.session() as session:
        bob = User(username="bob", role="user")
        session.add(bob)
        session.flush()
        _, secret = issue_token(session, user=bob, scopes="read,submit")
    return {**tokens, "bob": secret}
