"""The sweeps loop: every second, judge trials at their rungs and launch the next ones.

Trials are also judged the moment their points are stored (`judge_moved`, called by the
telemetry ingest): a short trial would otherwise pass a rung, or end, before the next pass.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import redis
from sqlalchemy import select

from backend.background import every
from backend.db import Database
from backend.jobs.models import Job
from backend.sweeps.models import Sweep
from backend.sweeps.service import launch, trials_of
from backend.sweeps.stopping import judge_rungs

log = logging.getLogger(__name__)
INTERVAL_SECONDS = 1.0


def pass_once(db: Database, client: redis.Redis, *, script_roots: Sequence[Path]) -> None:
    """One pass over the running sweeps, each under its row lock (one API process at a time
    on PostgreSQL; SQLite serialises writers anyway)."""
    with db.session() as session:
        running = session.scalars(select(Sweep.id).where(Sweep.state == "running")).all()
    for sweep_id in running:
        with db.session() as session:
            query = select(Sweep).where(Sweep.id == sweep_id).with_for_update(skip_locked=True)
            sweep = session.scalars(query).first()
            if sweep is None or sweep.state != "running":
                continue
            judge_rungs(session, client, sweep=sweep, trials=trials_of(session, sweep.id))
            launch(session, client, sweep=sweep, script_roots=script_roots)
            session.commit()


def judge_moved(db: Database, client: redis.Redis, job_ids: set[int]) -> int:
    """Judge the sweeps whose trials among `job_ids` just stored points; the number stopped.

    Each sweep under its row lock, as the loop takes it: a sweep the loop (or another API
    process) is judging now is skipped here and judged by that pass.
    """
    with db.session() as session:
        query = (
            select(Job.sweep_id)
            .join(Sweep, Sweep.id == Job.sweep_id)
            .where(Job.id.in_(job_ids), Sweep.state == "running")
            .distinct()
        )
        sweep_ids = [s for s in session.scalars(query) if s is not None]
    stopped = 0
    for sweep_id in sweep_ids:
        with db.session() as session:
            locked = select(Sweep).where(Sweep.id == sweep_id).with_for_update(skip_locked=True)
            sweep = session.scalars(locked).first()
            if sweep is None or sweep.state != "running":
                continue
            trials = trials_of(session, sweep.id)
            stopped += judge_rungs(session, client, sweep=sweep, trials=trials)
            session.commit()
    return stopped


def run_sweeps(
    db: Database, client: redis.Redis, stop: threading.Event, *, script_roots: Sequence[Path]
) -> None:
    """Run passes until stop is set (a failed pass is logged; the next one comes on time)."""
    every(
        INTERVAL_SECONDS,
        "sweeps",
        lambda: pass_once(db, client, script_roots=script_roots),
        stop,
        log=log,
    )
