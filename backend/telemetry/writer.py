"""Writing one ingest batch to the database and describing it as websocket deltas."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from backend.jobs.models import Attempt, Job, JobEvent
from backend.telemetry import models as rows
from backend.telemetry.store import insert_ignoring_duplicates
from workers.protocol import (
    DEVICES_STREAM,
    EVENTS_STREAM,
    LOGS_STREAM,
    METRICS_STREAM,
    AttemptEvent,
    MetricPoint,
)

#: PostgreSQL advisory lock key held by each ingest transaction ("tbingest")
INGEST_LOCK = 0x7462696E67657374
Delta = tuple[str, dict[str, Any]]
SAMPLE_COLUMNS = [c.name for c in rows.DeviceSample.__table__.columns if c.name != "id"]


def write_batch(session: Session, items: dict[str, list[Any]]) -> tuple[list[Delta], set[int]]:
    """Insert the items idempotently (not committed); the deltas and the jobs whose step moved."""
    if session.get_bind().dialect.name == "postgresql":
        # ingest transactions commit in the order they take ids (the series cache relies on it)
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": INGEST_LOCK})
    attempt_jobs = _attempt_jobs(session, items)
    metrics = [
        m for m in items[METRICS_STREAM] if m.attempt_id in attempt_jobs and math.isfinite(m.value)
    ]
    metric_rows = [m.model_dump() for m in metrics]
    insert_ignoring_duplicates(session, rows.MetricPoint, metric_rows)
    logs = [line.model_dump() for line in items[LOGS_STREAM] if line.attempt_id in attempt_jobs]
    insert_ignoring_duplicates(session, rows.LogLine, logs)
    samples = [s.model_dump() for s in items[DEVICES_STREAM] if math.isfinite(s.time)]
    insert_ignoring_duplicates(
        session, rows.DeviceSample, [{c: s[c] for c in SAMPLE_COLUMNS} for s in samples]
    )
    events = [e for e in items[EVENTS_STREAM] if e.attempt_id in attempt_jobs]
    for event in events:
        _write_event(session, event, attempt_jobs[event.attempt_id])
    progressed = _advance_steps(session, metrics, attempt_jobs)
    by_job: dict[int, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for metric in metric_rows:
        by_job[attempt_jobs[metric["attempt_id"]]]["metrics"].append(metric)
    for line in logs:
        by_job[attempt_jobs[line["attempt_id"]]]["logs"].append(line)
    for event in events:
        by_job[attempt_jobs[event.attempt_id]]["events"].append(event.model_dump())
    deltas: list[Delta] = [
        (f"job:{job_id}", {key: values})
        for job_id, parts in by_job.items()
        for key, values in parts.items()
    ]
    if samples:
        deltas.append(("cluster", {"samples": samples}))
    return deltas, progressed


def _write_event(session: Session, event: AttemptEvent, job_id: int) -> None:
    duplicate = session.scalars(
        select(JobEvent.id).where(
            JobEvent.attempt_id == event.attempt_id,
            JobEvent.kind == event.kind,
            JobEvent.step == event.step,
        )
    ).first()
    if duplicate is not None:
        return
    session.add(
        JobEvent(
            job_id=job_id,
            attempt_id=event.attempt_id,
            kind=event.kind,
            message=event.message,
            step=event.step,
        )
    )
    if event.kind == "checkpoint" and event.message:
        session.execute(
            update(Attempt)
            .where(Attempt.id == event.attempt_id)
            .values(last_checkpoint=event.message)
        )


def _advance_steps(
    session: Session, metrics: list[MetricPoint], attempt_jobs: dict[int, int]
) -> set[int]:
    newest: dict[int, int] = {}
    for metric in metrics:
        job_id = attempt_jobs[metric.attempt_id]
        newest[job_id] = max(newest.get(job_id, 0), metric.step)
    for job_id, step in newest.items():
        session.execute(update(Job).where(Job.id == job_id, Job.step < step).values(step=step))
    return set(newest)


def _attempt_jobs(session: Session, items: dict[str, list[Any]]) -> dict[int, int]:
    ids = {i.attempt_id for key in (METRICS_STREAM, LOGS_STREAM, EVENTS_STREAM) for i in items[key]}
    if not ids:
        return {}
    found = session.execute(select(Attempt.id, Attempt.job_id).where(Attempt.id.in_(ids))).all()
    return {attempt_id: job_id for attempt_id, job_id in found}
