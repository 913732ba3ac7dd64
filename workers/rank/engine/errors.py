"""Failures the engine explains itself: the supervisor reports their reason as the attempt's."""

from __future__ import annotations


class EngineFailure(Exception):
    """The attempt cannot go on, for a reason the user should read as is."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Diverged(EngineFailure):
    """The loss or the gradients became NaN or infinite and the NaN policy gave up."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"diverged: {detail}")
