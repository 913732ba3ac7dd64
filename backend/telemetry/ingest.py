"""Telemetry ingest: Redis Streams consumer group → database → websocket hub.

At-least-once: a batch is acknowledged only after its transaction commits, and every
row has an idempotent key, so a replayed or reclaimed entry adds nothing.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import redis
from pydantic import BaseModel, ValidationError
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from backend.db import Database
from backend.jobs.models import Attempt, Job, JobEvent
from backend.signals import announce_jobs
from backend.telemetry import models as rows
from backend.telemetry.store import insert_ignoring_duplicates
from workers.protocol import (
    ALL_STREAMS,
    BATCH_FIELD,
    DEVICES_STREAM,
    EVENTS_STREAM,
    INGEST_GROUP,
    LOGS_STREAM,
    METRICS_STREAM,
    AttemptEvent,
    Batch,
    DeviceSample,
    LogLine,
    MetricPoint,
)

log = logging.getLogger(__name__)

Sink = Callable[[str, dict[str, Any]], None]
ITEM_MODELS: dict[str, type[BaseModel]] = {
    METRICS_STREAM: MetricPoint,
    DEVICES_STREAM: DeviceSample,
    LOGS_STREAM: LogLine,
    EVENTS_STREAM: AttemptEvent,
}
RECLAIM_IDLE_MS = 30_000
PROGRESS_ANNOUNCE_SECONDS = 1.0


class Ingest:
    """Reads every telemetry stream with one consumer of the ingest group."""

    def __init__(
        self, *, db: Database, client: redis.Redis, sink: Sink, consumer: str, count: int = 500
    ) -> None:
        self.db = db
        self.client = client
        self.sink = sink
        self.consumer = consumer
        self.count = count
        self._announced: dict[int, float] = {}

    def ensure_groups(self) -> None:
        for stream in ALL_STREAMS:
            try:
                self.client.xgroup_create(stream, INGEST_GROUP, id="0", mkstream=True)
            except redis.ResponseError as err:
                if "BUSYGROUP" not in str(err):
                    raise

    def run(self, stop: threading.Event) -> None:
        """Consume until stop is set; survives Redis outages and flushes."""
        last_reclaim = 0.0
        while not stop.is_set():
            try:
                self.ensure_groups()
                self.consume(pending=True)
                while not stop.is_set():
                    if time.monotonic() - last_reclaim > RECLAIM_IDLE_MS / 1000:
                        self.reclaim()
                        last_reclaim = time.monotonic()
                    self.consume(block_ms=500)
            except redis.RedisError as err:
                log.warning("ingest: redis unavailable (%s); retrying", err)
                stop.wait(1.0)
            except Exception:
                log.exception("ingest pass failed")
                stop.wait(1.0)

    def consume(self, *, block_ms: int | None = None, pending: bool = False) -> int:
        """Read one round of entries (own pending ones first when asked) and store them."""
        start = "0" if pending else ">"
        response = self.client.xreadgroup(
            INGEST_GROUP,
            self.consumer,
            {s: start for s in ALL_STREAMS},
            count=self.count,
            block=block_ms,
        )
        rounds: list[Any] = response or []  # type: ignore[assignment]
        entries = {self._name(stream): messages for stream, messages in rounds}
        return self.store(entries)

    def reclaim(self) -> int:
        """Take over entries a dead consumer read but never acknowledged (XAUTOCLAIM)."""
        total = 0
        for stream in ALL_STREAMS:
            _, messages, *_ = self.client.xautoclaim(
                stream, INGEST_GROUP, self.consumer, min_idle_time=RECLAIM_IDLE_MS, count=self.count
            )
            total += self.store({stream: messages})
        return total

    def store(self, entries: dict[str, list[tuple[Any, dict[Any, Any]]]]) -> int:
        """Write the entries in one transaction, acknowledge them, then hand them to the hub."""
        items: dict[str, list[Any]] = defaultdict(list)
        ids: dict[str, list[Any]] = defaultdict(list)
        for stream, messages in entries.items():
            for entry_id, fields in messages:
                ids[stream].append(entry_id)
                if fields:
                    items[stream].extend(_parse(stream, fields))
        if not ids:
            return 0
        with self.db.session() as session:
            deltas = self._write(session, items)
        for stream, entry_ids in ids.items():
            self.client.xack(stream, INGEST_GROUP, *entry_ids)
        for topic, payload in deltas:
            self.sink(topic, payload)
        return sum(len(v) for v in ids.values())

    def _write(
        self, session: Session, items: dict[str, list[Any]]
    ) -> list[tuple[str, dict[str, Any]]]:
        attempt_jobs = _attempt_jobs(session, items)
        deltas: list[tuple[str, dict[str, Any]]] = []
        metrics = [
            m
            for m in items[METRICS_STREAM]
            if m.attempt_id in attempt_jobs and math.isfinite(m.value)
        ]
        insert_ignoring_duplicates(session, rows.MetricPoint, [m.model_dump() for m in metrics])
        logs = [line for line in items[LOGS_STREAM] if line.attempt_id in attempt_jobs]
        insert_ignoring_duplicates(session, rows.LogLine, [line.model_dump() for line in logs])
        samples = items[DEVICES_STREAM]
        insert_ignoring_duplicates(
            session, rows.DeviceSample, [s.model_dump() for s in samples if math.isfinite(s.time)]
        )
        events = [e for e in items[EVENTS_STREAM] if e.attempt_id in attempt_jobs]
        for event in events:
            self._write_event(session, event, attempt_jobs[event.attempt_id])
        progressed = self._advance_steps(session, metrics, attempt_jobs)
        by_job: dict[int, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
        for metric in metrics:
            by_job[attempt_jobs[metric.attempt_id]]["metrics"].append(metric.model_dump())
        for line in logs:
            by_job[attempt_jobs[line.attempt_id]]["logs"].append(line.model_dump())
        for event in events:
            by_job[attempt_jobs[event.attempt_id]]["events"].append(event.model_dump())
        for job_id, parts in by_job.items():
            for key, values in parts.items():
                deltas.append((f"job:{job_id}", {key: values}))
        if samples:
            deltas.append(("cluster", {"samples": [s.model_dump() for s in samples]}))
        session.commit()
        self._announce_progress(progressed)
        return deltas

    def _write_event(self, session: Session, event: AttemptEvent, job_id: int) -> None:
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
        self, session: Session, metrics: list[Any], attempt_jobs: dict[int, int]
    ) -> set[int]:
        newest: dict[int, int] = {}
        for metric in metrics:
            job_id = attempt_jobs[metric.attempt_id]
            newest[job_id] = max(newest.get(job_id, 0), metric.step)
        for job_id, step in newest.items():
            session.execute(update(Job).where(Job.id == job_id, Job.step < step).values(step=step))
        return set(newest)

    def _announce_progress(self, job_ids: set[int]) -> None:
        now = time.monotonic()
        due = {j for j in job_ids if now - self._announced.get(j, 0.0) >= PROGRESS_ANNOUNCE_SECONDS}
        for job_id in due:
            self._announced[job_id] = now
        announce_jobs(self.client, due)

    @staticmethod
    def _name(stream: Any) -> str:
        return stream.decode() if isinstance(stream, bytes) else str(stream)


def _parse(stream: str, fields: dict[Any, Any]) -> list[Any]:
    """The valid items of one entry; a malformed entry or item is logged and skipped."""
    raw = fields.get(BATCH_FIELD.encode()) or fields.get(BATCH_FIELD)
    model = ITEM_MODELS[stream]
    try:
        batch = Batch.model_validate(json.loads(raw or b""))
    except (TypeError, ValueError, ValidationError) as err:
        log.warning("ingest: dropping malformed entry on %s: %s", stream, err)
        return []
    parsed = []
    for item in batch.items:
        try:
            parsed.append(model.model_validate(item))
        except ValidationError as err:
            log.warning(
                "ingest: dropping invalid item from %s: %s", batch.producer, err.errors()[:1]
            )
    return parsed


def _attempt_jobs(session: Session, items: dict[str, list[Any]]) -> dict[int, int]:
    ids = {i.attempt_id for key in (METRICS_STREAM, LOGS_STREAM, EVENTS_STREAM) for i in items[key]}
    if not ids:
        return {}
    return dict(
        session.execute(select(Attempt.id, Attempt.job_id).where(Attempt.id.in_(ids))).all()
    )
