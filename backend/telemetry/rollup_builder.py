"""The background loop that keeps settled jobs' curve rollups current."""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from backend.db import Database
from backend.jobs.models import Attempt
from backend.telemetry import rollups
from backend.telemetry.cache import SeriesCache
from backend.telemetry.models import MetricPoint
from backend.telemetry.queries import job_curve

log = logging.getLogger(__name__)

SWEEP_EVERY_SECONDS = 10.0
JOBS_PER_SWEEP = 20


def build(session: Session, *, job_id: int, through: int) -> int:
    """Replace the job's rollups with ones of every metric's curve now; rows written."""
    attempts = select(Attempt.id).where(Attempt.job_id == job_id)
    names = session.scalars(
        select(MetricPoint.name).where(MetricPoint.attempt_id.in_(attempts)).distinct()
    ).all()
    cache = SeriesCache(max_points=0)  # private: a build must not evict the API's series
    rows = []
    for name in names:
        curve = job_curve(session, cache, job_id=job_id, name=name)
        rows += rollups.rollup_rows(curve, job_id=job_id, name=name, through=through)
    rollups.replace(session, job_id=job_id, rows=rows)
    return len(rows)


def sweep(db: Database, *, grace: float, limit: int = JOBS_PER_SWEEP) -> int:
    """Build the rollups of up to `limit` settled jobs, one transaction each; jobs built."""
    with db.session() as session:
        due = rollups.settled_jobs(session, grace=grace, limit=limit)
    built = 0
    for job_id, through in due:
        try:
            with db.session() as session:
                build(session, job_id=job_id, through=through)
            built += 1
        except IntegrityError:  # another API process built this job's rollups just now
            log.info("rollups of job %d were built elsewhere", job_id)
    return built


def run_rollups(db: Database, *, grace: float, stop: threading.Event) -> None:
    """Keep settled jobs' rollups current until stop is set."""
    while not stop.wait(SWEEP_EVERY_SECONDS):
        try:
            started = time.monotonic()
            built = sweep(db, grace=grace)
            if built:
                log.info("rolled up %d jobs in %.2f s", built, time.monotonic() - started)
        except Exception:
            log.exception("curve rollups failed; retrying in %.0f s", SWEEP_EVERY_SECONDS)
