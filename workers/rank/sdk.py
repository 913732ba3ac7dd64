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
import logging
import signal
import threading
import time
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path

from workers.contract.checkpoints import step_of
from workers.contract.protocol import (
    EVENTS_STREAM,
    MAX_METRIC_NAME,
    METRICS_STREAM,
    AttemptEvent,
)
from workers.contract.rank_env import RankEnv
from workers.telemetry import StreamPublisher, producer_name

log = logging.getLogger(__name__)


class _Session:
    """This rank's connection to Trainboard: its environment, publishers and stop flag."""

    def __init__(self, env: RankEnv) -> None:
        self.env = env
        self.stop = threading.Event()
        self._publishers: dict[str, StreamPublisher] = {}
        self._lock = threading.Lock()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: self.stop.set())
        atexit.register(self.close)

    def publisher(self, stream: str) -> StreamPublisher:
        """The (lazily started) publisher of one stream."""
        with self._lock:
            if stream not in self._publishers:
                producer = producer_name(f"attempt-{self.env.attempt_id}", f"rank-{self.env.rank}")
                self._publishers[stream] = StreamPublisher(self.env.redis_url, stream, producer)
            return self._publishers[stream]

    def close(self) -> None:
        """Flush and stop every publisher."""
        with self._lock:
            publishers, self._publishers = list(self._publishers.values()), {}
        for publisher in publishers:
            publisher.close()


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
    """`report` for several steps at once: (step, name → value) rows, queued under one lock."""
    session = _current()
    if session is None:
        return
    now = time.time()
    attempt, rank = session.env.attempt_id, session.env.rank
    points: list[dict[str, object]] = []
    for step, metrics in rows:
        step = int(step)
        # plain dicts of MetricPoint's fields: building a model per point cost ~5 µs each
        points += [
            {
                "attempt_id": attempt,
                "rank": rank,
                "step": step,
                "name": name if name in _checked_names else _checked(name),
                "value": float(value),
                "time": now,
            }
            for name, value in metrics.items()
        ]
    session.publisher(METRICS_STREAM).add_many(points)


#: metric names already checked against MAX_METRIC_NAME (a script reports the same few)
_checked_names: set[str] = set()


def _checked(name: str) -> str:
    if len(name) > MAX_METRIC_NAME:
        raise ValueError(f"metric name {name[:40]!r}... is longer than {MAX_METRIC_NAME}")
    _checked_names.add(name)
    return name


def event(kind: str, message: str = "", step: int | None = None) -> None:
    """Publish an attempt event (for example kind "checkpoint" with its step)."""
    session = _current()
    if session is None:
        return
    item = AttemptEvent(
        attempt_id=session.env.attempt_id, kind=kind, message=message, step=step, time=time.time()
    )
    session.publisher(EVENTS_STREAM).add(item.model_dump(mode="json"))


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
    """Deliver everything reported so far (called at exit anyway)."""
    if _session is not None:
        _session.close()
