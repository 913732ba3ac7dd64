"""The background loop that seals jobs' curves into rollup blocks while they run and after."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import numpy as np
from sqlalchemy import delete, func, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from backend.background import every
from backend.db import Database, utcnow
from backend.jobs.models import Attempt
from backend.telemetry.models import CurveBlock, CurveSeal
from backend.telemetry.series import cache, reads, rollups
from backend.telemetry.series.curves import Curve, merge_attempts, per_step

log = logging.getLogger(__name__)

SWEEP_EVERY_SECONDS = 10.0
#: settled jobs without any seal rows (finished before rollups existed) sealed per pass
JOBS_PER_SWEEP = 20
#: a running curve is sealed once this many steps every rank has passed are unsealed
MIN_SEAL_STEPS = 2048
#: a rank further behind the newest step than this (stalled, dead) does not hold sealing
#: back; its points, when they come, land in sealed blocks and are re-sealed
MAX_LAG_STEPS = 16_384
#: jobs whose last attempt finished this long ago (after the grace) are no longer visited
LATE_SECONDS = 3600.0


@dataclass(frozen=True)
class SealPlan:
    """What one seal changes, worked out from reads alone (see `plan_seal`)."""

    job_id: int
    name: str
    #: the seal row as read: (sealed_through, watermark), None where there was none
    read: tuple[int, int] | None
    watermark: int
    #: blocks from this step on are dropped (points committed into them since the last seal)
    stale: int | None
    sealed_through: int
    rows: list[dict[str, Any]]
    #: the start of the stored block that `rows` replace (it grows), None if none
    grown: int | None


def seal(session: Session, *, job_id: int, name: str, settled: bool) -> int:
    """Bring one curve's blocks up to date in one session; block rows written."""
    plan = plan_seal(session, job_id=job_id, name=name, settled=settled)
    return write_seal(session, plan) if plan is not None else 0


def plan_seal(session: Session, *, job_id: int, name: str, settled: bool) -> SealPlan | None:
    """Read one curve and work out its new blocks, writing nothing (None: nothing to change).

    Drops the blocks that points committed since the last seal touched, then seals up to
    the step every rank of the job's running attempts has passed (the end, once settled).
    Only reads: on SQLite a read holds no lock the ingest waits for, so sealing tens of
    thousands of points does not hold up the commits that live delivery follows.
    """
    state = session.scalar(
        select(CurveSeal).where(CurveSeal.job_id == job_id, CurveSeal.name == name)
    )
    read = None if state is None else (state.sealed_through, state.watermark)
    sealed_through, watermark = read or (rollups.LOWEST, 0)
    attempts = rollups.attempt_ids(session, job_id)
    # the marks are read before the rows: a point committed in between is seen as a change
    newest = max(cache.watermark(session, attempt_id=a, name=name) for a in attempts)
    if newest == watermark and not settled:
        return (
            None
            if read
            else SealPlan(job_id, name, None, watermark, None, sealed_through, [], None)
        )
    stale = None
    changed = rollups.lowest_change(session, attempts=attempts, name=name, after=watermark)
    if changed is not None and changed < sealed_through:
        stale = changed // rollups.BLOCK_STEPS * rollups.BLOCK_STEPS
        sealed_through = max(rollups.LOWEST, stale)
    plan = SealPlan(job_id, name, read, newest, stale, sealed_through, [], None)
    raws = [rollups.rows_from(session, a, name, sealed_through) for a in attempts]
    curve = merge_attempts([per_step(raw) for raw in raws])
    if not len(curve.step):
        return plan
    if settled:
        target = int(curve.step[-1]) + 1
    else:
        target = _passed_by_every_rank(session, attempts, raws, end=int(curve.step[-1]) + 1)
        if target - max(sealed_through, int(curve.step[0])) < MIN_SEAL_STEPS:
            return plan
    rows, grown = _blocks(session, plan, curve, target)
    return replace(plan, sealed_through=target, rows=rows, grown=grown)


def write_seal(session: Session, plan: SealPlan) -> int:
    """Write a plan in a short transaction; 0 if another builder sealed the curve since.

    Raises IntegrityError when another builder created the curve's seal row meanwhile.
    """
    state = session.scalar(
        select(CurveSeal)
        .where(CurveSeal.job_id == plan.job_id, CurveSeal.name == plan.name)
        .with_for_update()
    )
    if state is None:
        if plan.read is not None:
            return 0
        state = CurveSeal(
            job_id=plan.job_id, name=plan.name, sealed_through=rollups.LOWEST, watermark=0
        )
        session.add(state)
        session.flush()  # a racing builder's insert makes this one fail on the unique key
    elif (state.sealed_through, state.watermark) != (plan.read or (None, None)):
        return 0  # sealed elsewhere since this plan's reads
    curve = _curve(plan.job_id, plan.name)
    if plan.stale is not None:
        session.execute(delete(CurveBlock).where(*curve, CurveBlock.start_step >= plan.stale))
    if plan.grown is not None:
        session.execute(delete(CurveBlock).where(*curve, CurveBlock.start_step == plan.grown))
    if plan.rows:
        session.execute(insert(CurveBlock), plan.rows)
    state.watermark = plan.watermark
    state.sealed_through = plan.sealed_through
    return len(plan.rows)


def _passed_by_every_rank(
    session: Session, attempts: list[int], raws: list[cache.Raw], *, end: int
) -> int:
    """The lowest newest step among the running attempts' ranks, at most MAX_LAG_STEPS behind
    the newest (`end` if none has points)."""
    running = set(
        session.scalars(
            select(Attempt.id).where(Attempt.id.in_(attempts), Attempt.finished_at.is_(None))
        )
    )
    fronts = [
        int(raw.step[raw.rank == rank].max())
        for attempt, raw in zip(attempts, raws, strict=True)
        if attempt in running
        for rank in np.unique(raw.rank)
    ]
    return max(min(fronts), max(fronts) - MAX_LAG_STEPS) if fronts else end


def _blocks(
    session: Session, plan: SealPlan, curve: Curve, target: int
) -> tuple[list[dict[str, Any]], int | None]:
    """Rows sealing `curve`'s points below `target` into their aligned blocks, and the start
    of the stored block they replace (the last block so far grows), if any."""
    keep = curve.step < target
    curve = Curve(curve.step[keep], curve.time[keep], curve.value[keep])
    block = curve.step // rollups.BLOCK_STEPS
    cuts = np.flatnonzero(np.r_[True, block[1:] != block[:-1], True])
    rows: list[dict[str, Any]] = []
    grown = None
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=False):
        start = int(block[lo]) * rollups.BLOCK_STEPS
        part = Curve(curve.step[lo:hi], curve.time[lo:hi], curve.value[lo:hi])
        end = min(start + rollups.BLOCK_STEPS, target)
        fresh = rollups.block_rows(part, job_id=plan.job_id, name=plan.name, start=start, end=end)
        if start < plan.sealed_through:  # the last block so far grows
            fresh, grown = _grown(session, plan, fresh)
        rows += fresh
    return rows, grown


def _grown(
    session: Session, plan: SealPlan, fresh: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], int | None]:
    """`fresh` (rows of the last block's new points) joined to that block's stored rows, and
    that block's start (its stored rows are to be replaced), or `fresh` and None."""
    start = fresh[0]["start_step"]
    held = {
        row.width: row
        for row in session.scalars(
            select(CurveBlock).where(
                *_curve(plan.job_id, plan.name), CurveBlock.start_step == start
            )
        )
    }
    if not held:
        return fresh, None
    out = []
    for row in fresh:
        old = held[row["width"]]
        first = {k: getattr(old, k) for k in ("first_step", "first_time", "first_value")}
        if old.buckets == 0 or row["buckets"] == 0:  # a non-finite value stays in the block
            out.append({**row, **first, "buckets": 0, "data": b""})
            continue
        new = np.frombuffer(row["data"], "<f8").reshape(rollups.COLUMNS, row["buckets"])
        joined = rollups.join_extremes(rollups.extremes_of(old), new, row["width"])
        data = joined.astype("<f8").tobytes()
        out.append({**row, **first, "buckets": joined.shape[1], "data": data})
    return out, start


def _curve(job_id: int, name: str) -> tuple[ColumnElement[bool], ...]:
    return CurveBlock.job_id == job_id, CurveBlock.name == name


def due_jobs(session: Session, *, grace: float, limit: int) -> list[tuple[int, bool]]:
    """(job, settled) of jobs that run, finished lately, or were never sealed."""
    now = utcnow()
    per_job = (
        select(
            Attempt.job_id,
            func.count().label("attempts"),
            func.count(Attempt.finished_at).label("finished"),
            func.max(Attempt.finished_at).label("last_finish"),
        )
        .group_by(Attempt.job_id)
        .subquery()
    )
    running = per_job.c.attempts != per_job.c.finished
    recent = per_job.c.last_finish > now - timedelta(seconds=grace + LATE_SECONDS)
    sealed = select(CurveSeal.id).where(CurveSeal.job_id == per_job.c.job_id).exists()
    columns = (
        per_job.c.job_id,
        ~running & (per_job.c.last_finish <= now - timedelta(seconds=grace)),
    )
    live = session.execute(select(*columns).where(running | recent).order_by(per_job.c.job_id))
    old = session.execute(
        select(*columns).where(~running, ~recent, ~sealed).order_by(per_job.c.job_id).limit(limit)
    )
    return [(job, bool(settled)) for job, settled in [*live, *old]]


def sweep(db: Database, *, grace: float, limit: int = JOBS_PER_SWEEP) -> int:
    """Seal the curves of running and lately finished jobs, and of up to `limit` never sealed
    ones; block rows written."""
    with db.session() as session:
        due = due_jobs(session, grace=grace, limit=limit)
    written = 0
    for job_id, settled in due:
        with db.session() as session:
            names = reads.metric_names(session, job_id=job_id) or [""]
        for name in names:
            try:
                if not name:  # no metrics: remembered, so a settled job is not visited again
                    with db.session() as session:
                        _mark_empty(session, job_id)
                    continue
                with db.session() as session:  # reads only: the ingest goes on committing
                    plan = plan_seal(session, job_id=job_id, name=name, settled=settled)
                if plan is not None:
                    with db.session() as session:
                        written += write_seal(session, plan)
            except IntegrityError:  # another API process sealed this curve just now
                log.info("rollups of job %d %r were built elsewhere", job_id, name)
    return written


def _mark_empty(session: Session, job_id: int) -> None:
    exists = select(CurveSeal.id).where(CurveSeal.job_id == job_id, CurveSeal.name == "")
    if session.scalar(exists) is None:
        session.add(CurveSeal(job_id=job_id, name="", sealed_through=rollups.LOWEST, watermark=0))


def run_rollups(db: Database, *, grace: float, stop: threading.Event) -> None:
    """Keep jobs' curve blocks current until stop is set."""

    def sweep_and_log() -> None:
        started = time.monotonic()
        written = sweep(db, grace=grace)
        if written:
            log.info("sealed %d rollup rows in %.2f s", written, time.monotonic() - started)

    every(SWEEP_EVERY_SECONDS, "curve rollups", sweep_and_log, stop, log=log, wait_first=True)
