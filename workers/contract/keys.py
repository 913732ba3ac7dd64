"""Names in Redis that both sides compute from the deployment's id."""

from __future__ import annotations

MARKER_PREFIX = "trainboard:deployment:"


def deployment_marker(deployment: str) -> str:
    """The key a control plane keeps in its Redis so its workers know they share it."""
    return f"{MARKER_PREFIX}{deployment}"
