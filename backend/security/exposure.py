"""A loud warning when the API listens beyond loopback over plain HTTP."""

from __future__ import annotations

import logging
import sys

from backend.config import Settings
from workers.contract.addresses import is_loopback

log = logging.getLogger(__name__)


def exposure_warning(settings: Settings) -> str | None:
    """What to tell the operator, or None when the bind address or TLS setup is safe."""
    if is_loopback(settings.host) or settings.behind_proxy or settings.cookie_secure:
        return None
    return (
        f"WARNING: Trainboard listens on {settings.host}, reachable beyond this machine, over "
        "plain HTTP: tokens, passwords and session cookies cross the network in clear text, "
        "and submitting a job runs code on your GPU hosts. Serve it behind a TLS-terminating "
        "proxy (TRAINBOARD_BEHIND_PROXY=true, TRAINBOARD_COOKIE_SECURE=true) or bind 127.0.0.1. "
        "See docs/security.md."
    )


def warn_if_exposed(settings: Settings) -> None:
    """Print and log the exposure warning, if there is one."""
    message = exposure_warning(settings)
    if message:
        print(message, file=sys.stderr, flush=True)
        log.warning(message)
