"""Hang detection: each rank's last step, when it advanced, and its phase, as the relay sees them.

A rank is watched from its first reported step on. The attempt is hung once no live, watched
rank has advanced for the timeout (ranks wait for each other in collectives, so one stuck rank
soon stalls the rest): the spec's `health.hang_timeout_s`, or else max(10 x p99 of the gaps
between step advances, 60 s). A hang is flagged once; any progress re-arms the watch.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from workers.contract.protocol import AttemptEvent
from workers.supervisor import hang_stacks
from workers.telemetry import StreamPublisher

#: the derived timeout is never below this (seconds), so a fast loop's short pause is no hang
MIN_DERIVED_TIMEOUT = 60.0
STEP_TIME_FACTOR = 10.0
GAPS_KEPT = 512


@dataclass
class RankProgress:
    """What one rank last told its supervisor about its progress."""

    step: int | None = None
    advanced_at: float = 0.0
    phase: str | None = None
    #: it registered faulthandler on SIGUSR1 (the SDK does): signalling it dumps its stacks
    dumps_stacks: bool = False
    gaps: deque[float] = field(default_factory=lambda: deque(maxlen=GAPS_KEPT))


@dataclass(frozen=True)
class Stuck:
    """One rank that made no progress for the timeout."""

    rank: int
    step: int
    phase: str | None
    idle: float


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


class HangWatch:
    """Per-rank progress, fed by the relay threads, checked by the supervisor's poll loop."""

    def __init__(
        self,
        ranks: Iterable[int],
        *,
        timeout: float | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fixed = timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._ranks = {rank: RankProgress() for rank in ranks}
        self._flagged = False

    def steps(self, rank: int, steps: Iterable[int]) -> None:
        """A rank reported points for these steps: its newest one counts as progress."""
        newest = max(steps, default=None)
        if newest is None:
            return
        with self._lock:
            progress = self._ranks.get(rank)
            if progress is None or (progress.step is not None and newest <= progress.step):
                return
            now = self._clock()
            if progress.step is not None:
                progress.gaps.append(now - progress.advanced_at)
            progress.step, progress.advanced_at = newest, now
            self._flagged = False

    def declare(self, rank: int, *, phase: str | None, dumps_stacks: bool) -> None:
        """A rank said which phase it is in, and whether SIGUSR1 dumps its stacks."""
        with self._lock:
            progress = self._ranks.get(rank)
            if progress is not None:
                progress.phase = phase if phase is not None else progress.phase
                progress.dumps_stacks = progress.dumps_stacks or dumps_stacks

    def timeout(self) -> float | None:
        """The current hang timeout in seconds (None until some rank reported a step)."""
        with self._lock:
            return self._timeout()

    def _timeout(self) -> float | None:
        if self._fixed is not None:
            return self._fixed
        gaps = [gap for p in self._ranks.values() for gap in p.gaps]
        if not any(p.step is not None for p in self._ranks.values()):
            return None
        derived = STEP_TIME_FACTOR * _p99(gaps) if gaps else 0.0
        return max(derived, MIN_DERIVED_TIMEOUT)

    def stacks_from(self, ranks: Iterable[int]) -> list[int]:
        """Which of these ranks can be asked for their stacks (SIGUSR1)."""
        with self._lock:
            return [r for r in ranks if r in self._ranks and self._ranks[r].dumps_stacks]

    def check(self, alive: Iterable[int]) -> list[Stuck]:
        """Every live watched rank, once, when none of them advanced for the timeout."""
        with self._lock:
            timeout = self._timeout()
            if timeout is None or self._flagged:
                return []
            now = self._clock()
            stuck = [
                Stuck(rank, progress.step, progress.phase, now - progress.advanced_at)
                for rank in sorted(alive)
                if (progress := self._ranks.get(rank)) is not None and progress.step is not None
            ]
            if not stuck or any(s.idle < timeout for s in stuck):
                return []
            self._flagged = True
            return stuck


def hang_message(stuck: list[Stuck], timeout: float) -> str:
    """What the job is told: which ranks are stuck, where, for how long."""
    ranks = "; ".join(
        f"rank {s.rank} at step {s.step}"
        + (f" in phase {s.phase}" if s.phase else "")
        + f", idle {s.idle:.0f} s"
        for s in stuck
    )
    return f"hung: no progress for {timeout:.0f} s (hang_timeout): {ranks}"


log = logging.getLogger(__name__)

#: how long ranks get to write their stacks before an on_hang restart kills them
STACK_DUMP_SECONDS = 1.0


def flag_hang(
    hangs: HangWatch,
    *,
    ranks: dict[int, int],
    codes: list[int | None],
    attempt_id: int,
    events: StreamPublisher,
    restart: bool,
    logs: Path | None = None,
) -> str | None:
    """Flag a hang once: an event naming the stuck ranks, their stacks dumped (SIGUSR1).

    `ranks` maps rank → pid; `logs` is the attempt's log dir, where each rank's stack is
    saved (hang_stacks). With `restart`, the reason the attempt should end for.
    """
    alive = [rank for rank, code in zip(ranks, codes, strict=False) if code is None]
    stuck = hangs.check(alive)
    if not stuck:
        return None
    message = hang_message(stuck, hangs.timeout() or 0.0)
    dumping = hangs.stacks_from(alive)
    since = hang_stacks.offsets(logs, dumping) if logs is not None else {}
    for rank in dumping:  # faulthandler writes every thread's stack to the rank's stderr
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(ranks[rank], signal.SIGUSR1)
    stacks = (
        f"; Python stacks of ranks {', '.join(map(str, dumping))} are in their stderr logs"
        + (" and saved as hang-stacks/rank-<r>.txt" if since else "")
        if dumping
        else "; no stacks: no rank registered a dump (the SDK does)"
    )
    log.warning("attempt %d: %s", attempt_id, message)
    step = min(s.step for s in stuck)
    events.add(
        AttemptEvent(
            attempt_id=attempt_id,
            kind="hung",
            message=(message + stacks)[:4096],
            step=step,
            time=time.time(),
        )
    )
    if not restart:
        if logs is not None and since:
            hang_stacks.save_later(logs, since, attempt_id=attempt_id, step=step, events=events)
        return None
    if logs is not None and since:
        hang_stacks.save(logs, since, attempt_id=attempt_id, step=step, events=events)
    else:
        time.sleep(STACK_DUMP_SECONDS)
    return f"{message} (on_hang: restart)"
