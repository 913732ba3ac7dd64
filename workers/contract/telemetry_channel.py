"""The wire format between a rank and its supervisor: one JSON object per line on a pipe.

A rank holds no credential; it writes what it measured to the pipe it inherited
(`TRAINBOARD_TELEMETRY_FD`), and its supervisor, which knows which attempt and rank
the pipe belongs to, validates, stamps and publishes it. Nothing a rank writes names
its attempt or rank: those come from the pipe, never from the message.

- metric points: ``{"m": [[step, name, value], ...]}``
- an attempt event: ``{"e": {"kind": str, "message": str, "step": int | null}}``; the
  engine's ``started`` event adds ``"facts"`` (``RunFacts``: global batch, world size...)
- progress: ``{"p": {"phase": str | null, "stacks": bool}}`` (the phase it is in now; whether
  SIGUSR1 dumps its Python stacks to stderr, for hang reports)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: longest line a supervisor reads; a longer one is dropped whole
MAX_LINE_BYTES = 1 << 20
POINTS_KEY = "m"
EVENT_KEY = "e"
PROGRESS_KEY = "p"
MAX_PHASE = 64
#: the event kind that declares which end of a metric is best: message "name=min|max|none"
DIRECTION_EVENT = "metric_direction"
DIRECTIONS = ("min", "max", "none")


def points_message(rows: Iterable[tuple[int, Mapping[str, float]]]) -> dict[str, Any]:
    """The message for (step, name → value) rows."""
    return {
        POINTS_KEY: [
            [int(step), name, float(value)]
            for step, metrics in rows
            for name, value in metrics.items()
        ]
    }


def event_message(
    kind: str, message: str, step: int | None, facts: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """The message for one attempt event (a start event with the facts the engine uses)."""
    event: dict[str, Any] = {"kind": kind, "message": message, "step": step}
    if facts is not None:
        event["facts"] = dict(facts)
    return {EVENT_KEY: event}


def progress_message(phase: str | None, *, stacks: bool = False) -> dict[str, Any]:
    """The message saying which phase a rank is in (and that SIGUSR1 dumps its stacks)."""
    return {PROGRESS_KEY: {"phase": phase, "stacks": stacks}}


def direction_message(name: str, direction: str) -> dict[str, Any]:
    """The event declaring a metric's best end ("min", "max" or "none": neither)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")
    return event_message(DIRECTION_EVENT, f"{name}={direction}", None)


def parse_direction(message: str) -> tuple[str, str] | None:
    """(metric name, direction) of a direction event's message; None if it is not one."""
    name, _, direction = message.rpartition("=")
    return (name, direction) if name and direction in DIRECTIONS else None
