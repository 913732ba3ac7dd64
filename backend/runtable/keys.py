"""Spec path values of jobs for the run table's sort and group keys, kept between requests.

Reading a spec path of 10,000 jobs makes the database parse 10,000 JSON specs (about half
of a grouped query's time, docs/benchmarks.md). A job's spec only changes with its row, and
every change of the row moves its `updated_at`; so the values are kept per process and
read again only for the jobs whose `updated_at` moved since (or that are new).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from backend.jobs.models import Job

#: paths kept per database (the least recently used is forgotten)
MAX_PATHS = 16
#: job ids per refreshing query
CHUNK = 5000
#: values kept per path at most (beyond it the path starts over)
MAX_JOBS = 500_000


def path_column(path: str) -> ColumnElement[Any]:
    """A spec path's value as the database's text (PostgreSQL) or plain value (SQLite)."""
    return Job.spec[tuple(path.split("."))].as_string()


def typed(value: Any) -> Any:
    """A number, true/false or null given as text (as PostgreSQL's #>> does) as its value."""
    if isinstance(value, str):
        try:
            found = json.loads(value)
        except ValueError:
            return value
        return found if found is None or isinstance(found, bool | int | float) else value
    return value


class PathValues:
    """(database, path) → job id → (updated_at, value), refreshed by updated_at."""

    def __init__(self) -> None:
        self._held: OrderedDict[tuple[str, str], dict[int, tuple[datetime, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def values(self, session: Session, path: str, stamps: dict[int, datetime]) -> dict[int, Any]:
        """The path's value of each job in `stamps` (job id → its updated_at now)."""
        key = (str(session.get_bind().engine.url), path)
        with self._lock:  # one reader at a time: the first pays, the next find it kept
            held = self._held.pop(key, {})
            if len(held) > MAX_JOBS:
                held = {}
            self._held[key] = held
            while len(self._held) > MAX_PATHS:
                self._held.popitem(last=False)
            stale = [i for i, stamp in stamps.items() if i not in held or held[i][0] != stamp]
            for start in range(0, len(stale), CHUNK):
                chunk = stale[start : start + CHUNK]
                query = select(Job.id, Job.updated_at, path_column(path)).where(Job.id.in_(chunk))
                for job_id, stamp, value in session.execute(query):
                    held[job_id] = (stamp, typed(value))
            return {i: held[i][1] for i in stamps if i in held}


#: this process's values (the API serves the run table from any of its threads)
KEPT = PathValues()
