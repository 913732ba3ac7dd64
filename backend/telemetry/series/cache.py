"""An in-process cache of raw metric series as numpy columns, refreshed from marked rows.

Each (attempt, metric) keeps its rows in (step, rank) order and a watermark: the newest
id of the series' marked rows it has seen. Every transaction that adds rows to a series
adds a marked row at or below their lowest step (see MetricPoint), and ingest
transactions commit in id order (SQLite has one writer; on PostgreSQL the ingest
serialises its transactions with an advisory lock). So one index probe tells whether
a series changed, the marks after the watermark give the lowest step that did, and
the cache re-reads the series from that step (an index range) and keeps what is below.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

ROWS_FROM = (
    "SELECT rank, step, time, value FROM metric_points"
    " WHERE attempt_id = ? AND name = ? AND step >= ? ORDER BY step, rank"
)
# `mark` alone, as the partial index's own condition reads, so SQLite uses that index
NEWEST_MARK = "SELECT max(id) FROM metric_points WHERE attempt_id = ? AND name = ? AND mark"
# `step + 0`: with min(step) PostgreSQL may walk the key's index up from the lowest step
# instead of the marks after `id` (docs/benchmarks.md)
MARKS_AFTER = (
    "SELECT max(id), min(step + 0) FROM metric_points"
    " WHERE attempt_id = ? AND name = ? AND mark AND id > ?"
)


@dataclass(frozen=True)
class Raw:
    """One metric of one attempt: every rank's points, in (step, rank) order."""

    rank: np.ndarray
    step: np.ndarray
    time: np.ndarray
    value: np.ndarray
    #: the newest marked id seen; compare with `watermark()` to tell whether it changed
    watermark: int

    def __len__(self) -> int:
        return len(self.step)


EMPTY = Raw(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0), np.empty(0), watermark=0)


def watermark(session: Session, *, attempt_id: int, name: str) -> int:
    """The series' watermark now (0: no rows); anything committed since X makes it > X.

    One index probe (the newest marked row's id).
    """
    return int(_query(session, NEWEST_MARK, (attempt_id, name))[0][0] or 0)


class SeriesCache:
    """Least-recently-used raw series, bounded by their total number of points."""

    def __init__(self, max_points: int = 5_000_000) -> None:
        self.max_points = max_points
        self._held: OrderedDict[tuple[int, str], Raw] = OrderedDict()
        self._lock = threading.Lock()

    def raw(self, session: Session, *, attempt_id: int, name: str) -> Raw:
        """The series as it is committed now."""
        key = (attempt_id, name)
        with self._lock:
            held = self._held.get(key, EMPTY)
        newest = watermark(session, attempt_id=attempt_id, name=name)
        if newest == 0:
            return EMPTY
        if newest != held.watermark:
            held = _refresh(session, held, attempt_id, name, newest)
        with self._lock:
            self._held[key] = held
            self._held.move_to_end(key)
            total = sum(len(r) for r in self._held.values())
            while total > self.max_points and len(self._held) > 1:
                _, evicted = self._held.popitem(last=False)
                total -= len(evicted)
        return held


def _refresh(session: Session, held: Raw, attempt_id: int, name: str, newest: int) -> Raw:
    """The held rows below the lowest step changed since its watermark, then all from it."""
    lowest = -(2**31)  # no watermark: all of it (the newest mark is enough, not every step)
    if held.watermark:
        after, low = _query(session, MARKS_AFTER, (attempt_id, name, held.watermark))[0]
        if after is None:  # the watermark went down (rows deleted): read it all again
            held = EMPTY
        else:
            newest, lowest = after, low
    rows = np.array(_query(session, ROWS_FROM, (attempt_id, name, lowest)), np.float64)
    rank, step, time, value = rows.reshape(-1, 4).T
    keep = int(np.searchsorted(held.step, lowest, side="left"))
    # the watermark is the mark read *before* the rows: a transaction committed between the
    # two statements has a newer mark, so the next query re-reads from its lowest step
    return Raw(
        rank=np.concatenate([held.rank[:keep], rank.astype(np.int64)]),
        step=np.concatenate([held.step[:keep], step.astype(np.int64)]),
        time=np.concatenate([held.time[:keep], time]),
        value=np.concatenate([held.value[:keep], value]),
        watermark=int(newest),
    )


def _query(session: Session, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Plain DBAPI tuples: a Row per point would cost more than the query."""
    if session.get_bind().dialect.paramstyle != "qmark":
        sql = sql.replace("?", "%s")
    raw: Any = session.connection().connection.driver_connection
    cursor = raw.cursor()
    try:
        cursor.execute(sql, params)
        return list(cursor.fetchall())
    finally:
        cursor.close()
