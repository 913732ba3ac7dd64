"""Straggler detection from the `step_time` points ranks already send.

A rank whose median step time over its newest WINDOW points exceeds the median of the other
ranks' points by the job's `health.straggler_factor` is flagged once per attempt, as a job
event naming its node and device. The event is stored here, not by the ingest, so once it is
committed it is also appended to the live stream as the job topic's `events` delta (as the
ingest does for a hang): an open job page shows it at once, not when the job next changes.
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
from collections import defaultdict
from dataclasses import dataclass

import redis
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from backend.background import every
from backend.db import Database
from backend.jobs.attempt_states import AttemptState
from backend.jobs.cluster import STRAGGLER_KIND
from backend.jobs.models import Attempt, AttemptSlice, Job, JobEvent
from backend.telemetry.live import publish_live
from backend.telemetry.models import MetricPoint

log = logging.getLogger(__name__)

METRIC = "step_time"
#: newest points per rank compared, and the fewest a rank needs before it is judged
WINDOW = 20
MIN_POINTS = 10
#: a difference below this (seconds) is jitter, whatever the ratio
MIN_DIFFERENCE = 0.005
RUN_EVERY_SECONDS = 5.0
KIND = STRAGGLER_KIND  # the cluster view (backend.jobs.cluster) counts them per device


@dataclass(frozen=True)
class Straggler:
    """One slow rank of one attempt, where it runs, and by how much."""

    attempt_id: int
    rank: int
    node: str
    device: int | None
    median: float
    others: float
    job_id: int = 0

    @property
    def message(self) -> str:
        where = f"node {self.node}" + (f" device {self.device}" if self.device is not None else "")
        return (
            f"rank {self.rank} on {where} is a straggler: median step time "
            f"{self.median * 1000:.1f} ms vs {self.others * 1000:.1f} ms on the other ranks "
            f"({self.median / self.others:.1f}x, newest {WINDOW} steps)"
        )


def _recent_step_times(session: Session, attempt_id: int) -> dict[int, list[float]]:
    """Each rank's newest WINDOW step times."""
    newest = (
        select(
            MetricPoint.rank,
            MetricPoint.value,
            func.row_number()
            .over(partition_by=MetricPoint.rank, order_by=MetricPoint.step.desc())
            .label("n"),
        )
        .where(MetricPoint.attempt_id == attempt_id, MetricPoint.name == METRIC)
        .subquery()
    )
    by_rank: dict[int, list[float]] = defaultdict(list)
    for rank, value in session.execute(
        select(newest.c.rank, newest.c.value).where(newest.c.n <= WINDOW)
    ):
        by_rank[rank].append(value)
    return by_rank


def _placement(session: Session, attempt_id: int) -> dict[int, tuple[str, int | None]]:
    """rank → (node, device index) of an attempt, from its slices."""
    where: dict[int, tuple[str, int | None]] = {}
    slices = session.scalars(select(AttemptSlice).where(AttemptSlice.attempt_id == attempt_id))
    for part in slices:
        local = len(part.devices)
        for i, device in enumerate(part.devices):
            where[part.node_rank * local + i] = (part.node_name, int(device))
    return where


def stragglers_of(session: Session, *, attempt: Attempt, factor: float) -> list[Straggler]:
    """The ranks of this attempt slower than the others by `factor` (judged on enough points)."""
    times = {
        r: v for r, v in _recent_step_times(session, attempt.id).items() if len(v) >= MIN_POINTS
    }
    if len(times) < 2:
        return []
    placement = _placement(session, attempt.id)
    found = []
    for rank, values in sorted(times.items()):
        median = statistics.median(values)
        others = statistics.median([v for r, vs in times.items() if r != rank for v in vs])
        if others > 0 and median > factor * others and median - others >= MIN_DIFFERENCE:
            node, device = placement.get(rank, (attempt.node_name, None))
            found.append(
                Straggler(attempt.id, rank, node, device, median, others, job_id=attempt.job_id)
            )
    return found


def flag_stragglers(session: Session) -> list[Straggler]:
    """Flag, once per attempt and rank, every straggler of the running attempts."""
    flagged = []
    running = session.execute(
        select(Attempt, Job)
        .join(Job, Job.id == Attempt.job_id)
        .where(Attempt.state == AttemptState.running)
    ).all()
    for attempt, job in running:
        factor = job.spec_model.health.straggler_factor
        known = set(
            session.scalars(
                select(JobEvent.message).where(
                    JobEvent.attempt_id == attempt.id, JobEvent.kind == KIND
                )
            )
        )
        for straggler in stragglers_of(session, attempt=attempt, factor=factor):
            if any(m.startswith(f"rank {straggler.rank} ") for m in known):
                continue
            session.add(
                JobEvent(job_id=job.id, attempt_id=attempt.id, kind=KIND, message=straggler.message)
            )
            log.info("job %d: %s", job.id, straggler.message)
            flagged.append(straggler)
    return flagged


def announce_stragglers(client: redis.Redis, flagged: list[Straggler]) -> None:
    """Send committed straggler events live: the `events` delta of each job's topic."""
    for straggler in flagged:
        event = {
            "attempt_id": straggler.attempt_id,
            "kind": KIND,
            "message": straggler.message,
            "step": None,
            "time": time.time(),
        }
        publish_live(client, f"job:{straggler.job_id}", {"events": [event]})


def run_stragglers(*, db: Database, client: redis.Redis, stop: threading.Event) -> None:
    """Look for stragglers every few seconds until stop is set, and send them live."""

    def step() -> None:
        with db.session() as session:
            flagged = flag_stragglers(session)
        announce_stragglers(client, flagged)  # once committed: a page refetching finds the row

    every(RUN_EVERY_SECONDS, "stragglers", step, stop, log=log, wait_first=True)
