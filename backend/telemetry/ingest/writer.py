"""Writing one ingest batch to the database and describing it as websocket deltas."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel
from sqlalchemy import bindparam, delete, func, select, text, update
from sqlalchemy.orm import Session

from backend.db import as_utc
from backend.jobs.attempt_states import FENCED_ATTEMPT_VALUES, AttemptState
from backend.jobs.models import Attempt, Job, JobEvent
from backend.telemetry import models as rows
from backend.telemetry.ingest.points import Points
from backend.telemetry.ingest.store import insert_ignoring_duplicates, insert_metric_points
from workers.contract.protocol import (
    DEVICES_STREAM,
    EVENTS_STREAM,
    LOGS_STREAM,
    METRICS_STREAM,
)

#: PostgreSQL advisory lock key held by each ingest transaction ("tbingest")
INGEST_LOCK = 0x7462696E67657374
Delta = tuple[str, dict[str, Any]]
# Built once and run on the session's connection (Core): every round runs both, and building
# them and the ORM's execution context (which for the UPDATE first looks for loaded Job
# objects to synchronise) took more of a small round than its inserts (docs/benchmarks.md,
# "Live delivery": the per-hop times)
#: a job's newest step, raised (never lowered) to :newest
RAISE_STEP = (
    update(Job)
    .where(Job.id == bindparam("job"), Job.step < bindparam("newest"))
    .values(step=bindparam("newest"))
)
#: the job, state and end of each attempt in :ids. FOR KEY SHARE (PostgreSQL; SQLite has one
#: writer): what a foreign key's check takes for each row, taken once per attempt, so none
#: is deleted before this commits
ATTEMPTS = (
    select(Attempt.id, Attempt.job_id, Attempt.state, Attempt.finished_at)
    .where(Attempt.id.in_(bindparam("ids", expanding=True)))
    .with_for_update(read=True, key_share=True)
)
#: one validated stream item (a dict with every field of its workers.contract.protocol model)
Item = dict[str, Any]
SAMPLE_COLUMNS = [c.name for c in rows.DeviceSample.__table__.columns if c.name != "id"]


def write_batch(
    session: Session,
    items: Mapping[str, Sequence[Item]],
    *,
    log_lines_per_attempt: int | None = None,
) -> tuple[list[Delta], set[int]]:
    """Insert validated item dicts idempotently (uncommitted); the deltas and the jobs moved.

    The metric points may come as `Points` (their columns already taken). An attempt's
    stored log lines are kept to the newest `log_lines_per_attempt` (None: all).
    """
    if session.get_bind().dialect.name == "postgresql":
        # ingest transactions commit in the order they take ids (the series cache relies on it)
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": INGEST_LOCK})
    points = Points.of(items[METRICS_STREAM])
    attempt_jobs, fenced = _attempt_jobs(session, points, items)
    # a NaN/inf value (a diverged run) passes validation and is dropped here, unstored
    known = np.fromiter(attempt_jobs, np.int32, len(attempt_jobs))
    keep = np.isin(points.attempt_id, known) & np.isfinite(points.value)
    for attempt_id, cutoff in fenced.items():
        # a fenced attempt (lost, withdrawn) may train on for a moment: what it measured
        # after the control plane ended it is not the job's
        keep &= ~((points.attempt_id == attempt_id) & (points.time > cutoff))
    points = points.where(keep)
    insert_metric_points(session, points)
    logs = [line for line in items[LOGS_STREAM] if line["attempt_id"] in attempt_jobs]
    stored = insert_ignoring_duplicates(session, rows.LogLine, logs)
    if log_lines_per_attempt is not None:
        added = Counter(line["attempt_id"] for line in logs)
        cap_log_lines(session, added, log_lines_per_attempt, counted=stored == len(logs))
    samples = [s for s in items[DEVICES_STREAM] if math.isfinite(s["time"])]
    insert_ignoring_duplicates(
        session, rows.DeviceSample, [{c: s[c] for c in SAMPLE_COLUMNS} for s in samples]
    )
    events = [_plain(e) for e in items[EVENTS_STREAM] if e["attempt_id"] in attempt_jobs]
    for event in events:
        _write_event(session, event, attempt_jobs[event["attempt_id"]])
    by_job: dict[int, dict[str, list[dict[str, Any]]]] = defaultdict(dict)
    for job_id, picked in _points_by_job(points, attempt_jobs).items():
        newest = int(points.step[picked].max())
        session.connection().execute(RAISE_STEP, {"job": job_id, "newest": newest})
        by_job[job_id]["metrics"] = (
            points.rows if len(picked) == len(points) else [points.rows[i] for i in picked.tolist()]
        )
    progressed = set(by_job)
    for key, extra in (("logs", logs), ("events", events)):
        for item in extra:
            by_job[attempt_jobs[item["attempt_id"]]].setdefault(key, []).append(item)
    deltas: list[Delta] = [
        (f"job:{job_id}", {key: values})
        for job_id, parts in by_job.items()
        for key, values in parts.items()
    ]
    if samples:
        deltas.append(("cluster", {"samples": samples}))
    return deltas, progressed


def cap_log_lines(
    session: Session, added: Mapping[int, int], cap: int, *, counted: bool = True
) -> None:
    """Count each attempt's new lines (`added`); over `cap`, delete its oldest lines down to
    the newest `cap` and add them to its dropped count.

    One UPDATE per attempt in the batch, and the trim finds its boundary from the oldest
    side (as many index entries as it deletes). `counted`: every line of the batch went in;
    when some were replays (skipped), the attempts' counts are taken again instead.
    """
    lines: Any = rows.LogLine.__table__
    for attempt_id, count in added.items():
        ours = lines.c.attempt_id == attempt_id
        at = update(Attempt).where(Attempt.id == attempt_id)
        if counted:
            grown = at.values(log_lines=Attempt.log_lines + count).returning(Attempt.log_lines)
            stored = session.execute(grown).scalar_one()
        else:
            stored = session.scalar(select(func.count()).select_from(lines).where(ours)) or 0
            session.execute(at.values(log_lines=stored))
        if stored <= cap:
            continue
        newest_gone = session.scalar(
            select(lines.c.id).where(ours).order_by(lines.c.id).offset(stored - cap - 1).limit(1)
        )
        gone = session.connection().execute(delete(lines).where(ours, lines.c.id <= newest_gone))
        session.execute(
            at.values(
                log_lines=Attempt.log_lines - gone.rowcount,
                log_lines_dropped=Attempt.log_lines_dropped + gone.rowcount,
            )
        )


def _points_by_job(points: Points, attempt_jobs: dict[int, int]) -> dict[int, np.ndarray]:
    """Each job's rows of points (indexes, in row order)."""
    by_job: dict[int, np.ndarray] = {}
    for attempt_id, picked in points.groups(points.attempt_id).items():
        job_id = attempt_jobs[attempt_id]
        held = by_job.get(job_id)
        by_job[job_id] = picked if held is None else np.sort(np.concatenate([held, picked]))
    return by_job


def _plain(event: Item) -> Item:
    """The event with its facts (validated into a model) as plain JSON for the row and delta."""
    facts = event.get("facts")
    return {**event, "facts": facts.model_dump()} if isinstance(facts, BaseModel) else event


def _write_event(session: Session, event: Item, job_id: int) -> None:
    same = [
        JobEvent.attempt_id == event["attempt_id"],
        JobEvent.kind == event["kind"],
        JobEvent.step == event["step"],
    ]
    if event["kind"] == "hang_stack":  # one per rank at the hang's step, each its own
        same.append(JobEvent.message == event["message"])
    duplicate = session.scalars(select(JobEvent.id).where(*same)).first()
    if duplicate is not None:
        return
    session.add(
        JobEvent(
            job_id=job_id,
            attempt_id=event["attempt_id"],
            kind=event["kind"],
            message=event["message"],
            step=event["step"],
        )
    )
    if event["kind"] == "started" and event.get("facts"):
        # what the engine uses, shown on the job page instead of the spec's arithmetic
        session.execute(
            update(Attempt).where(Attempt.id == event["attempt_id"]).values(facts=event["facts"])
        )
    if event["kind"] == "checkpoint" and event["message"]:
        # only a running attempt's checkpoint becomes its newest: one that was fenced (lost,
        # withdrawn) may train on for a moment, and what it writes is never resumed from
        session.execute(
            update(Attempt)
            .where(Attempt.id == event["attempt_id"], Attempt.state == AttemptState.running)
            .values(last_checkpoint=event["message"])
        )


def _attempt_jobs(
    session: Session, points: Points, items: Mapping[str, Sequence[Item]]
) -> tuple[dict[int, int], dict[int, float]]:
    """The job of each attempt named; and, for fenced attempts, when they were ended."""
    ids = set(np.unique(points.attempt_id).tolist())
    ids.update(i["attempt_id"] for key in (LOGS_STREAM, EVENTS_STREAM) for i in items[key])
    if not ids:
        return {}, {}
    found = session.connection().execute(ATTEMPTS, {"ids": list(ids)}).all()
    fenced = {
        attempt_id: as_utc(finished).timestamp()
        for attempt_id, _, state, finished in found
        if state in FENCED_ATTEMPT_VALUES and finished is not None
    }
    return {attempt_id: job_id for attempt_id, job_id, _, _ in found}, fenced
