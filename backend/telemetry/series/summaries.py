"""The loop that keeps every job's metric summaries (final, best, min, max) current.

The run table sorts and pages thousands of jobs by a metric's final or best value; it
reads these rows and never a curve. A summary is compare's summary of the same curve
(queries.job_view), so the two pages agree. Which series changed is read off the marked
rows (see MetricPoint): every ingest transaction adds a marked row to each series it
writes, and they commit in id order, so the marked rows after the newest id summarised so
far name every series that changed since.
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from backend.background import every
from backend.db import Database
from backend.jobs.models import Attempt, JobEvent
from backend.telemetry.models import MetricSummary
from backend.telemetry.series import directions
from backend.telemetry.series.cache import SeriesCache
from backend.telemetry.series.queries import job_view
from workers.contract.telemetry_channel import DIRECTION_EVENT, parse_direction

log = logging.getLogger(__name__)

SUMMARIZE_EVERY_SECONDS = 2.0
#: the longest an idle summarizer sleeps without news
IDLE_SECONDS = 30.0
#: curve points a summary reads at most (long curves come from their rollup blocks)
POINTS = 1000
CHANGED = text(
    "SELECT attempt_id, name, max(id) FROM metric_points"
    " WHERE mark AND id > :after GROUP BY attempt_id, name"
)


class Summarizer:
    """Summaries of the series that changed since the last pass (and of newly declared ones)."""

    def __init__(self, db: Database, cache: SeriesCache) -> None:
        self.db, self.cache = db, cache
        self.after: int | None = None  # newest marked point id summarised
        self.events_after = 0  # newest direction event seen

    def run_once(self) -> int:
        """Bring the changed summaries up to date; how many were written."""
        with self.db.session() as session:
            if self.after is None:
                self.after = int(session.scalar(select(func.max(MetricSummary.watermark))) or 0)
            due, newest = self._changed(session)
        written = 0
        for (job_id, name), watermark in sorted(due.items()):
            try:
                with self.db.session() as session:
                    write(session, self.cache, job_id=job_id, name=name, watermark=watermark)
                    written += 1
            except IntegrityError:  # another API process wrote this summary just now
                log.info("summary of job %d %r was written elsewhere", job_id, name)
        self.after = max(self.after, newest)
        return written

    def _changed(self, session: Session) -> tuple[dict[tuple[int, str], int], int]:
        """(job, metric) → newest mark of the series changed since `after`; the newest mark."""
        rows = session.execute(CHANGED, {"after": self.after}).all()
        jobs = dict(
            session.execute(
                select(Attempt.id, Attempt.job_id).where(
                    Attempt.id.in_({attempt for attempt, _, _ in rows})
                )
            ).all()
        )
        due: dict[tuple[int, str], int] = {}
        for attempt, name, mark in rows:
            if attempt in jobs:
                key = (jobs[attempt], name)
                due[key] = max(due.get(key, 0), int(mark))
        declared = session.execute(
            select(JobEvent.id, JobEvent.job_id, JobEvent.message).where(
                JobEvent.id > self.events_after, JobEvent.kind == DIRECTION_EVENT
            )
        ).all()
        for event_id, job_id, message in declared:
            self.events_after = max(self.events_after, event_id)
            parsed = parse_direction(message)
            if parsed is not None:
                due.setdefault((job_id, parsed[0]), 0)
        return due, max((int(mark) for _, _, mark in rows), default=self.after or 0)


def write(
    session: Session, cache: SeriesCache, *, job_id: int, name: str, watermark: int
) -> MetricSummary:
    """Summarise one job's metric into its row (watermark 0: keep the row's own)."""
    said = directions.declared(session, job_ids=[job_id]).get(job_id, {}).get(name)
    _, found = job_view(session, cache, job_id=job_id, name=name, points=POINTS, declared=said)
    row = session.scalar(
        select(MetricSummary).where(MetricSummary.job_id == job_id, MetricSummary.name == name)
    )
    if row is None:
        row = MetricSummary(job_id=job_id, name=name, watermark=0)
        session.add(row)
    for key, value in found.items():
        setattr(row, key, value)
    row.watermark = max(row.watermark, watermark)
    session.flush()
    return row


def run_summaries(
    *, db: Database, cache: SeriesCache, stop: threading.Event, news: threading.Event | None = None
) -> None:
    """Keep metric summaries current until stop is set. A pass that found nothing changed
    sleeps until `news` (a job's points move it: the ingest announces the job) or
    IDLE_SECONDS."""
    summarizer = Summarizer(db, cache)

    def pass_once() -> bool:
        return summarizer.run_once() > 0

    every(
        SUMMARIZE_EVERY_SECONDS,
        "metric summaries",
        pass_once,
        stop,
        log=log,
        wait_first=True,
        news=news,
        idle_seconds=IDLE_SECONDS,
    )
