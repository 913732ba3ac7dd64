"""Curves read around the rollups: raw when short or non-finite or per rank, blocks made once."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable

import numpy as np
import pytest
from sqlalchemy import insert, select, text

from backend.db import Database
from backend.jobs.models import Attempt
from backend.telemetry.models import CurveBlock, MetricPoint
from backend.telemetry.series import rollups
from backend.telemetry.series.cache import SeriesCache
from backend.telemetry.series.curves import downsample, summary
from backend.telemetry.series.queries import job_curve, job_view
from backend.telemetry.series.reads import metric_names
from backend.telemetry.series.rollup_builder import (
    LATE_SECONDS,
    due_jobs,
    seal,
    sweep,
)
from tests.telemetry.curve_data import blocks_match_the_curve, fill, finish, walk
from tests.telemetry.helpers import add_attempt
from tests.workers.worker_helpers import wait_for

STEPS = 60_000


def test_short_curves_and_non_finite_blocks_are_read_raw(
    database: Database, new_attempt: Callable[..., tuple[int, int]]
) -> None:
    job, attempt = new_attempt(state="succeeded")
    fill(database, attempt, walk(500))
    broken = walk(STEPS, start=1000)
    broken.value[5] = np.inf  # (SQLite keeps NaN as NULL)
    fill(database, attempt, broken)
    finish(database, attempt)
    sweep(database, grace=0)
    cache = SeriesCache()
    with database.session() as session:
        assert rollups.load(session, job_id=job, name="loss", points=100) is None
        view, stats = job_view(session, cache, job_id=job, name="loss", points=100)
        raw = job_curve(session, cache, job_id=job, name="loss")
    assert np.array_equal(view.step, downsample(raw, 100).step)
    assert stats == summary("loss", raw)


@pytest.mark.parametrize("rank", [0, 1])
def test_a_rank_is_read_raw(
    database: Database, new_attempt: Callable[..., tuple[int, int]], rank: int
) -> None:
    job, attempt = new_attempt(state="succeeded")
    fill(database, attempt, walk(20_000), ranks=2)
    finish(database, attempt)
    sweep(database, grace=0)
    cache = SeriesCache()
    with database.session() as session:
        view, stats = job_view(session, cache, job_id=job, name="loss", points=0, rank=rank)
    assert len(view.step) == 20_000
    assert stats["final"] == pytest.approx(walk(20_000).value[-1] + rank)


def waits_on_a_lock(database: Database) -> bool:
    """Whether a connection to the database waits on a lock another one holds."""
    with database.session() as session:
        waiting = session.scalar(
            text(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
        )
    return bool(waiting)


def test_two_processes_sealing_one_curve_leave_one_set_of_blocks(
    migrated_postgres_url: str,
) -> None:
    database = Database(migrated_postgres_url)
    try:
        job, attempt = add_attempt(database)
        fill(database, attempt, walk(STEPS))
        first = database.sessions()
        assert seal(first, job_id=job, name="loss", settled=False) > 0  # not committed yet
        racer = concurrent.futures.ThreadPoolExecutor(1).submit(sweep, database, grace=0)
        wait_for(lambda: waits_on_a_lock(database), what="the racer to wait on the seal row")
        first.commit()
        first.close()
        assert racer.result(timeout=60) == 0  # it lost the race and says so, no error
        fill(database, attempt, walk(5_000, seed=2, start=STEPS))
        first = database.sessions()
        assert seal(first, job_id=job, name="loss", settled=False) > 0  # holds the seal row
        racer = concurrent.futures.ThreadPoolExecutor(1).submit(sweep, database, grace=0)
        wait_for(lambda: waits_on_a_lock(database), what="the racer to wait on the locked row")
        first.commit()
        first.close()
        assert racer.result(timeout=60) == 0
        blocks_match_the_curve(database, job)
        with database.session() as session:
            widths = list(session.scalars(select(CurveBlock.width).where(CurveBlock.job_id == job)))
        assert sorted(widths) == sorted(rollups.widths())  # one block, once
    finally:
        database.dispose()


def test_metric_names_span_attempts_and_a_job_without_metrics_is_visited_once(
    database: Database, new_attempt: Callable[..., tuple[int, int]]
) -> None:
    job, first = new_attempt()
    empty, nothing = new_attempt()
    with database.session() as session:
        second = Attempt(
            job_id=job, number=2, node_name="node-a", devices=[0], state="running", master_port=2
        )
        session.add(second)
        session.flush()
        ids = [first, second.id]
    for attempt, names in zip(ids, (["loss", "acc"], ["loss", "lr"]), strict=True):
        with database.engine.begin() as conn:
            for name in names:
                conn.execute(
                    insert(MetricPoint).values(
                        attempt_id=attempt, rank=0, step=1, name=name, value=1.0, time=1.0
                    )
                )
    with database.session() as session:
        assert metric_names(session, job_id=job) == ["acc", "loss", "lr"]
        assert metric_names(session, job_id=empty) == []
    for attempt in (*ids, nothing):
        finish(database, attempt, seconds_ago=10 * LATE_SECONDS)
    with database.session() as session:
        assert {j for j, _ in due_jobs(session, grace=0, limit=10)} == {job, empty}
    sweep(database, grace=0)
    with database.session() as session:
        assert due_jobs(session, grace=0, limit=10) == []
