"""The API fixtures of a module whose tests all use one app, `module_api` (see its docstring).

Such a module imports them, and its tests' `api`, `tokens` and `settings` are then that app's:
`from tests.backend.shared_app import shared_api, shared_settings, shared_tokens  # noqa: F401`.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from backend.config import Settings
from tests.backend.conftest import SharedApi


@pytest.fixture(name="api")
def shared_api(module_api: SharedApi) -> TestClient:
    """The module's app (no practical submission limit): each test's request is refused or
    writes rows no other test of the module reads."""
    return module_api.client


@pytest.fixture(name="tokens")
def shared_tokens(module_api: SharedApi) -> dict[str, str]:
    """The module app's tokens: admin, alice and node n1."""
    return module_api.tokens


@pytest.fixture(name="settings")
def shared_settings(module_api: SharedApi) -> Settings:
    """The module app's settings."""
    return module_api.settings
