"""The small SDK a training script imports to talk to Trainboard.

Inside a Trainboard attempt (the TRAINBOARD_* variables are set)::

    from workers import sdk

    start = sdk.resume_step() or 0          # where a resumed attempt continues
    for step in range(start + 1, steps + 1):
        loss = train_step()
        sdk.report(step, loss=loss)         # a live point on the dashboard
        if sdk.should_stop():               # cancel or pause was asked for
            save(sdk.checkpoint_dir() / f"step-{step}")
            break

Outside Trainboard every function is a harmless no-op (one warning is logged).
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import logging
import signal
import threading
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path

from workers.contract.checkpoints import step_of
from workers.contract.protocol import MAX_METRIC_NAME
from workers.contract.rank_env import RankEnv, signal_file
from workers.contract.telemetry_channel import (
    MAX_PHASE,
    direction_message,
    event_message,
    points_message,
    progress_message,
)
from workers.rank.channel import TelemetryChannel

log = logging.getLogger(__name__)


class _Session:
    """This rank's link to Trainboard: its environment, telemetry pipe and stop flag."""

    def __init__(self, env: RankEnv) -> None:
        self.env = env
        self.stop = threading.Event()
        fd = env.telemetry_fd
        #: None when the supervisor gave no pipe (points then go nowhere, with one warning)
        self.channel = TelemetryChannel(fd) if fd is not None else None
        if self.channel is None:
            warnings.warn(
                "no telemetry pipe from the supervisor: points are not reported", stacklevel=3
            )
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_sigterm)
        # a hang report asks every rank for its Python stacks: they go to stderr, the logs
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        self.send(progress_message(None, stacks=True))
        atexit.register(self.close)

    def _on_sigterm(self, _signum: int, _frame: object) -> None:
        """Stop at the next report, and leave a mark: the supervisor learns that this rank
        stopped on a signal (perhaps not its own: Slurm's time limit signals the ranks
        themselves) even though it exits 0, and reports no success for it."""
        if not self.stop.is_set():
            with contextlib.suppress(OSError):  # no mark: the supervisor reads what it did
                signal_file(self.env.run_dir, self.env.rank).write_text("SIGTERM\n")
        self.stop.set()

    def send(self, message: dict[str, object]) -> None:
        """Hand one message to the supervisor."""
        if self.channel is not None:
            self.channel.send(message)

    def close(self) -> None:
        """Close the pipe: everything sent so far is already with the supervisor."""
        if self.channel is not None:
            self.channel.close()


_session: _Session | None = None
_warned = False
_session_lock = threading.Lock()


def _current() -> _Session | None:
    global _session, _warned
    with _session_lock:
        if _session is None:
            env = RankEnv.from_env()
            if env is None:
                if not _warned:
                    _warned = True
                    warnings.warn(
                        "not running under Trainboard: sdk calls do nothing", stacklevel=3
                    )
                return None
            _session = _Session(env)
        return _session


def report(step: int, **metrics: float) -> None:
    """Publish one point per named metric at this optimizer step (never blocks training)."""
    report_many([(step, metrics)])


def report_many(rows: Iterable[tuple[int, Mapping[str, float]]]) -> None:
    """`report` for several steps at once: (step, name → value) rows, sent as one message."""
    session = _current()
    if session is None:
        return
    rows = list(rows)
    for _, metrics in rows:
        for name in metrics:
            if name not in _checked_names:
                _checked(name)
    session.send(points_message(rows))


#: metric names already checked against MAX_METRIC_NAME (a script reports the same few)
_checked_names: set[str] = set()


def _checked(name: str) -> str:
    if len(name) > MAX_METRIC_NAME:
        raise ValueError(f"metric name {name[:40]!r}... is longer than {MAX_METRIC_NAME}")
    _checked_names.add(name)
    return name


def declare(name: str, *, direction: str) -> None:
    """Say which end of a metric is best: "min", "max" or "none" (neither, like grad_norm).

    Compare and the run table rank the metric's "best" by it instead of by its name.
    """
    message = direction_message(_checked(name), direction)
    session = _current()
    if session is not None:
        session.send(message)


def event(
    kind: str, message: str = "", step: int | None = None, facts: Mapping[str, int] | None = None
) -> None:
    """Send an attempt event (kind "checkpoint" with its step; "started" with its facts)."""
    session = _current()
    if session is None:
        return
    session.send(event_message(kind, message, step, facts))


def phase(name: str) -> None:
    """Say what this rank does now (data, forward_backward, optimizer, checkpoint, collective).

    A hang report names each stuck rank's last phase. One short message per call: mark
    phases that may block, not every micro-step of a fast loop.
    """
    session = _current()
    if session is None:
        return
    session.send(progress_message(name[:MAX_PHASE] or None))


def checkpoint_dir() -> Path | None:
    """The directory this job's checkpoints go in (shared by all its attempts)."""
    session = _current()
    return session.env.checkpoint_dir if session else None


def should_stop() -> bool:
    """True once Trainboard asked this rank to stop (cancel or pause: SIGTERM)."""
    session = _current()
    return session.stop.is_set() if session else False


def resume_step() -> int | None:
    """The step of the checkpoint this attempt resumes from, or None for a fresh start."""
    session = _current()
    if session is None or session.env.resume_from is None:
        return None
    return step_of(session.env.resume_from)


def flush() -> None:
    """Write everything reported so far to the supervisor (called at exit anyway)."""
    if _session is not None and _session.channel is not None:
        _session.channel.flush()
