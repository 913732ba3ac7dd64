"""Binding beyond loopback without TLS prints a warning."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from backend.security.exposure import exposure_warning


def test_public_bind_without_tls_warns(settings: Settings) -> None:
    public = settings.model_copy(update={"host": "0.0.0.0"})
    message = exposure_warning(public)
    assert message is not None and "0.0.0.0" in message and "TLS" in message
    assert exposure_warning(public.model_copy(update={"behind_proxy": True})) is None
    for host in ("127.0.0.1", "localhost", "::1"):
        assert exposure_warning(settings.model_copy(update={"host": host})) is None


def test_the_warning_is_printed_when_the_app_starts(
    settings: Settings, tokens: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    public = settings.model_copy(update={"host": "192.0.2.7"})
    with TestClient(create_app(public)):
        pass
    assert "WARNING: Trainboard listens on 192.0.2.7" in capsys.readouterr().err
