"""Live: the websocket hub, its protocol and the streams and relays that feed it."""

from backend.telemetry.live.feed import publish_live

__all__ = ["publish_live"]
