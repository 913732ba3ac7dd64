"""The sweeps loop: every second, judge trials at their rungs and launch the next ones.

Trials are also judged the moment their points are stored (`judge_moved`, called by the
telemetry ingest): a short trial would otherwise pass a rung, or end, before the next pass.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from weakref import WeakKeyDictionary

import redis
from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.background import every
from backend.db import Database
from backend.jobs.models import Job
from backend.sweeps.models import Sweep
from backend.sweeps.service import launch, trials_of
from backend.sweeps.stopping import judge_rungs
from backend.sweeps.writes import SWEEP_WRITES

log = logging.getLogger(__name__)
INTERVAL_SECONDS = 1.0
#: the longest the loop sleeps while no sweep runs and no job changed
IDLE_SECONDS = 30.0


def _each_running(
    db: Database, sweep_ids: Sequence[int], step: Callable[[Session, Sweep], int]
) -> int:
    """Run `step` on each sweep still running, under its row lock (one API process at a
    time on PostgreSQL: a sweep another pass holds is skipped, that pass does it; SQLite
    serialises writers anyway), committing after each; the sum of what the steps return."""
    total = 0
    for sweep_id in sweep_ids:
        with SWEEP_WRITES.held(db.engine.url), db.session() as session:
            query = select(Sweep).where(Sweep.id == sweep_id).with_for_update(skip_locked=True)
            sweep = session.scalars(query).first()
            if sweep is None or sweep.state != "running":
                continue
            total += step(session, sweep)
            session.commit()
    return total


def pass_once(db: Database, client: redis.Redis, *, script_roots: Sequence[Path]) -> bool:
    """One pass over the running sweeps: judge their trials at rungs, launch the next ones;
    whether any sweep was running."""
    with db.session() as session:
        running = session.scalars(select(Sweep.id).where(Sweep.state == "running")).all()

    def step(session: Session, sweep: Sweep) -> int:
        stopped = judge_rungs(session, client, sweep=sweep, trials=trials_of(session, sweep.id))
        launch(session, client, sweep=sweep, script_roots=script_roots)
        return stopped

    _each_running(db, running, step)
    return bool(running)


#: each job's sweep (None: not a trial), per database. A job's sweep is set when the job is
#: created and never changes, so the ingest's hook asks about a job once, not every round:
#: the query took 0.6 ms of the ingest thread's CPU a round with no sweep at all, at 200
#: rounds a second (docs/benchmarks.md, "Live delivery", fourth session)
_SWEEP_OF: WeakKeyDictionary[Database, dict[int, int | None]] = WeakKeyDictionary()
#: jobs remembered per database before the memo starts over
_SWEEP_OF_MAX = 100_000


def judge_moved(db: Database, client: redis.Redis, job_ids: set[int]) -> int:
    """Judge the sweeps whose trials among `job_ids` just stored points; the number stopped."""
    known = _SWEEP_OF.setdefault(db, {})
    if unknown := job_ids - known.keys():
        if len(known) > _SWEEP_OF_MAX:
            known.clear()
        with db.session() as session:
            trials = select(Job.id, Job.sweep_id).where(Job.id.in_(unknown))
            known.update(session.execute(trials).tuples().all())
    sweeps = {known[j] for j in job_ids if known.get(j) is not None}
    if not sweeps:
        return 0
    with db.session() as session:
        running = select(Sweep.id).where(Sweep.id.in_(sweeps), Sweep.state == "running")
        sweep_ids = session.scalars(running).all()
    return _each_running(
        db,
        sweep_ids,
        lambda session, sweep: judge_rungs(
            session, client, sweep=sweep, trials=trials_of(session, sweep.id)
        ),
    )


def run_sweeps(
    db: Database,
    client: redis.Redis,
    stop: threading.Event,
    *,
    script_roots: Sequence[Path],
    news: threading.Event | None = None,
) -> None:
    """Run passes until stop is set (a failed pass is logged; the next one comes on time).

    While no sweep runs, the loop waits for `news` (a job changed: a sweep's trials are jobs,
    so a new sweep's first trials announce it) or IDLE_SECONDS, instead of asking each second.
    """
    every(
        INTERVAL_SECONDS,
        "sweeps",
        lambda: pass_once(db, client, script_roots=script_roots),
        stop,
        log=log,
        news=news,
        idle_seconds=IDLE_SECONDS,
    )
