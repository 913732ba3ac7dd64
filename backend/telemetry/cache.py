"""An in-process cache of raw metric series as numpy columns, refreshed by row id.

Each (attempt, metric) keeps its rows in id order with the highest id it holds; a
query first asks the database for that series' newest id (an index lookup) and
reads only rows after it. Ingest transactions commit in id order (SQLite has one
writer; on PostgreSQL the ingest serialises its transactions with an advisory
lock), so nothing can appear below the id already held.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from backend.telemetry.models import MetricPoint

ROWS_AFTER = (
    "SELECT id, rank, step, time, value FROM metric_points"
    " WHERE attempt_id = ? AND name = ? AND id > ? ORDER BY id"
)


@dataclass(frozen=True)
class Raw:
    """One metric of one attempt: every rank's points, in id order."""

    rank: np.ndarray
    step: np.ndarray
    time: np.ndarray
    value: np.ndarray
    newest_id: int

    def __len__(self) -> int:
        return len(self.step)


EMPTY = Raw(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0), np.empty(0), newest_id=0)


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
        newest = session.scalar(
            select(func.max(MetricPoint.id)).where(
                MetricPoint.attempt_id == attempt_id, MetricPoint.name == name
            )
        )
        if newest is None:
            return EMPTY
        if newest > held.newest_id:
            held = _extend(held, _rows_after(session, attempt_id, name, held.newest_id))
        with self._lock:
            self._held[key] = held
            self._held.move_to_end(key)
            total = sum(len(r) for r in self._held.values())
            while total > self.max_points and len(self._held) > 1:
                _, evicted = self._held.popitem(last=False)
                total -= len(evicted)
        return held


def _rows_after(session: Session, attempt_id: int, name: str, after: int) -> np.ndarray:
    """Rows (id, rank, step, time, value) after id `after`, as one float64 array."""
    mark = "?" if session.get_bind().dialect.paramstyle == "qmark" else "%s"
    sql = ROWS_AFTER.replace("?", mark)
    raw: Any = session.connection().connection.driver_connection
    cursor = raw.cursor()
    try:  # plain DBAPI tuples: a Row per point would cost more than the query
        cursor.execute(sql, (attempt_id, name, after))
        rows = cursor.fetchall()
    finally:
        cursor.close()
    return np.array(rows, dtype=np.float64).reshape(-1, 5)


def _extend(held: Raw, rows: np.ndarray) -> Raw:
    if not len(rows):
        return held
    ids, ranks, steps, times, values = rows.T
    return Raw(
        rank=np.concatenate([held.rank, ranks.astype(np.int64)]),
        step=np.concatenate([held.step, steps.astype(np.int64)]),
        time=np.concatenate([held.time, times.astype(np.float64)]),
        value=np.concatenate([held.value, values.astype(np.float64)]),
        newest_id=int(ids.max()),
    )
