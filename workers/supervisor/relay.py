"""The trusted end of a rank's telemetry pipe: validate, stamp attempt and rank, publish.

A rank is user code. What it sends is checked item by item; attempt, rank and time come
from this side (the pipe identifies the rank), so a rank cannot write another attempt's
points, and a checkpoint it announces must lie inside its own job's checkpoint directory.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from workers.contract.protocol import MAX_INT, MAX_METRIC_NAME, RunFacts
from workers.contract.telemetry_channel import (
    EVENT_KEY,
    MAX_LINE_BYTES,
    MAX_PHASE,
    POINTS_KEY,
    PROGRESS_KEY,
)
from workers.supervisor.hang_watch import HangWatch
from workers.supervisor.startup import PREFIX as STARTUP_PREFIX
from workers.supervisor.startup import StartupPhases
from workers.telemetry import StreamPublisher

log = logging.getLogger(__name__)

MAX_EVENT_KIND = 64
MAX_EVENT_MESSAGE = 4096
#: event kinds only Trainboard raises (they notify): a rank cannot forge them
PLATFORM_KINDS = frozenset({"hung", "straggler", "hang_stack"})


class TelemetryRelay:
    """One thread reading one rank's pipe until the rank closes it (or exits)."""

    def __init__(
        self,
        read_fd: int,
        *,
        attempt_id: int,
        rank: int,
        metrics: StreamPublisher,
        events: StreamPublisher,
        checkpoint_dir: Path,
        on_checkpoint: Callable[[], None] = lambda: None,
        watch: HangWatch | None = None,
        startup: StartupPhases | None = None,
    ) -> None:
        self.attempt_id, self.rank = attempt_id, rank
        self._fd, self._metrics, self._events = read_fd, metrics, events
        self._checkpoints = checkpoint_dir.resolve()
        self._on_checkpoint = on_checkpoint
        self._watch = watch
        self._startup = startup
        self._heard = False  # a first message came (the rank's interpreter runs)
        #: items refused so far (malformed, out of range, or naming a foreign path)
        self.refused = 0
        self._thread = threading.Thread(
            target=self._run, name=f"relay-{attempt_id}-{rank}", daemon=True
        )
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        """Wait until the rank's end is closed and everything read is queued for Redis."""
        self._thread.join(timeout)

    def _run(self) -> None:
        with os.fdopen(self._fd, "rb", buffering=1 << 16) as pipe:
            skipping = False  # inside a line longer than MAX_LINE_BYTES: dropped whole
            while line := pipe.readline(MAX_LINE_BYTES + 1):
                complete = line.endswith(b"\n")
                if skipping or not complete and len(line) > MAX_LINE_BYTES:
                    skipping = not complete
                    self.refused += 1 if complete else 0
                    continue
                self.handle(line)
        if self.refused:
            log.warning(
                "attempt %d rank %d: refused %d telemetry items",
                self.attempt_id,
                self.rank,
                self.refused,
            )

    def handle(self, line: bytes) -> None:
        """Validate one message and queue what is valid of it."""
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            self.refused += 1
            return
        if not isinstance(message, dict):
            self.refused += 1
            return
        if not self._heard and self._startup is not None:
            self._heard = True
            self._startup.message(self.rank)
        now = time.time()
        if POINTS_KEY in message:
            self._points(message[POINTS_KEY], now)
        if EVENT_KEY in message:
            self._event(message[EVENT_KEY], now)
        if PROGRESS_KEY in message:
            self._progress(message[PROGRESS_KEY])

    def _points(self, rows: Any, now: float) -> None:
        if not isinstance(rows, list):
            self.refused += 1
            return
        points = []
        for row in rows:
            point = self._point(row, now)
            if point is None:
                self.refused += 1
            else:
                points.append(point)
        if points:
            self._metrics.add_many(points)
            if self._watch is not None:
                self._watch.steps(self.rank, (point["step"] for point in points))
            if self._startup is not None:
                self._startup.step(self.rank)

    def _progress(self, progress: Any) -> None:
        phase = progress.get("phase") if isinstance(progress, dict) else None
        stacks = progress.get("stacks", False) if isinstance(progress, dict) else None
        valid_phase = phase is None or isinstance(phase, str) and 0 < len(phase) <= MAX_PHASE
        if not valid_phase or not isinstance(stacks, bool):
            self.refused += 1
        else:
            if self._watch is not None:
                self._watch.declare(self.rank, phase=phase, dumps_stacks=stacks)
            if self._startup is not None:
                self._startup.phase(self.rank, phase)

    def _point(self, row: Any, now: float) -> dict[str, Any] | None:
        if not isinstance(row, list) or len(row) != 3:
            return None
        step, name, value = row
        if type(step) is not int or not 0 <= step <= MAX_INT:
            return None
        if not isinstance(name, str) or not 0 < len(name) <= MAX_METRIC_NAME:
            return None
        if type(value) not in (int, float):
            return None
        return {
            "attempt_id": self.attempt_id,
            "rank": self.rank,
            "step": step,
            "name": name,
            "value": float(value),
            "time": now,
        }

    def _event(self, event: Any, now: float) -> None:
        if not isinstance(event, dict):
            self.refused += 1
            return
        kind, message, step = event.get("kind"), event.get("message", ""), event.get("step")
        valid = (
            isinstance(kind, str)
            and 0 < len(kind) <= MAX_EVENT_KIND
            and isinstance(message, str)
            and len(message) <= MAX_EVENT_MESSAGE
            and (step is None or (type(step) is int and 0 <= step <= MAX_INT))
        )
        forged = kind in PLATFORM_KINDS or str(kind).startswith(STARTUP_PREFIX)
        if not valid or forged or (kind == "checkpoint" and not self._own_checkpoint(message)):
            self.refused += 1
            return
        if kind == "checkpoint":
            self._on_checkpoint()
        item = {"attempt_id": self.attempt_id, "kind": kind, "message": message, "step": step}
        facts = event.get("facts")
        if kind == "started" and facts is not None:
            try:
                item["facts"] = RunFacts.model_validate(facts).model_dump()
            except ValidationError:
                self.refused += 1  # the event stands; facts that do not fit are dropped
        self._events.add({**item, "time": now})

    def _own_checkpoint(self, path: str) -> bool:
        """A checkpoint event names a directory inside this job's checkpoint directory."""
        if "\0" in path or not path:
            return False
        resolved = Path(path).resolve()
        return (
            resolved.is_relative_to(self._checkpoints)
            and resolved != self._checkpoints
            and resolved.is_dir()
        )
