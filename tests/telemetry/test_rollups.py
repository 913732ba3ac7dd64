"""Curve rollups: exact bucket extremes, blocks sealed while a job runs and after, late points."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from sqlalchemy import select

from backend.db import Database
from backend.jobs.models import Attempt
from backend.telemetry.models import CurveBlock, CurveSeal
from backend.telemetry.series import rollups
from backend.telemetry.series.cache import SeriesCache
from backend.telemetry.series.curves import Curve, downsample, summary
from backend.telemetry.series.queries import job_curve, job_view
from backend.telemetry.series.rollup_builder import (
    MAX_LAG_STEPS,
    sweep,
)
from tests.telemetry.conftest import migrated
from tests.telemetry.curve_data import blocks_match_the_curve, error, fill, finish, walk

STEPS = 60_000


@pytest.fixture(
    params=["sqlite_url", pytest.param("migrated_postgres_url", marks=pytest.mark.slow)],
    ids=["sqlite", "postgres"],
)
def db_url(request: pytest.FixtureRequest, migrate: Callable[[str], None]) -> str:
    """Either database; curves of 60,000+ steps take 1-2.5 s a test on PostgreSQL, so that
    twin runs in `make test` and not in `make test-fast`."""
    return migrated(request, migrate)


def shown_faithfully(view: Curve, raw: Curve, points: int) -> None:
    """Every point shown is a real one, ends included, drawn as well as LTTB over all of them."""
    assert len(view.step) == points
    where = np.searchsorted(raw.step, view.step)
    assert np.array_equal(raw.step[where], view.step)
    assert np.array_equal(raw.value[where], view.value)
    assert view.step[0] == raw.step[0] and view.step[-1] == raw.step[-1]
    assert error(view, raw) <= 1.1 * error(downsample(raw, points), raw)


def test_a_settled_long_job_is_served_from_rollups_with_exact_summary(
    database: Database, new_attempt: Callable[..., tuple[int, int]]
) -> None:
    job, attempt = new_attempt(state="succeeded")
    fill(database, attempt, walk(STEPS), ranks=2)
    finish(database, attempt)
    assert sweep(database, grace=30) == len(rollups.widths())  # one block, every width
    assert sweep(database, grace=30) == 0  # current now
    blocks_match_the_curve(database, job)
    cache = SeriesCache()
    with database.session() as session:
        raw = job_curve(session, cache, job_id=job, name="loss")
        stored = rollups.load(session, job_id=job, name="loss", points=500)
        assert stored is not None and len(stored.step) < len(raw.step) // 10
        view, stats = job_view(session, cache, job_id=job, name="loss", points=500)
        # a point budget finer than the finest level is read raw
        assert rollups.load(session, job_id=job, name="loss", points=STEPS) is None
        assert rollups.load(session, job_id=job, name="loss", points=0) is None
    assert stats == summary("loss", raw)
    shown_faithfully(view, raw, 500)


def test_a_running_job_is_sealed_below_its_slowest_rank_and_read_with_its_raw_tail(
    database: Database, new_attempt: Callable[..., tuple[int, int]]
) -> None:
    job, attempt = new_attempt()
    curve = walk(STEPS)
    fill(database, attempt, curve, ranks=1)  # rank 0 is at 59,999
    fill(database, attempt, within(curve, below=50_000), first_rank=1)  # at 49,999
    assert sweep(database, grace=30) > 0
    with database.session() as session:
        state = session.scalars(select(CurveSeal).where(CurveSeal.job_id == job)).one()
    assert state.sealed_through == 49_999  # every rank has passed the steps below
    fill(database, attempt, within(curve, above=50_000), first_rank=1)
    fill(database, attempt, walk(10_000, seed=5, start=STEPS), ranks=2)  # more steps, 2 ranks
    for read in range(2):  # what the query sees before and after the builder's next pass
        cache = SeriesCache()
        with database.session() as session:
            raw = job_curve(session, cache, job_id=job, name="loss")
            assert rollups.load(session, job_id=job, name="loss", points=1000) is not None
            view, stats = job_view(session, cache, job_id=job, name="loss", points=1000)
        assert stats == summary("loss", raw)
        shown_faithfully(view, raw, 1000)
        assert sweep(database, grace=30) > 0 or read == 1
    with database.session() as session:
        state = session.scalars(select(CurveSeal).where(CurveSeal.job_id == job)).one()
        starts = set(session.scalars(select(CurveBlock.start_step)))
    assert state.sealed_through == STEPS + 9_999 and starts == {0, rollups.BLOCK_STEPS}
    blocks_match_the_curve(database, job)  # the block that grew equals one built at once


def test_a_stalled_rank_holds_sealing_back_by_a_bounded_lag(
    database: Database, new_attempt: Callable[..., tuple[int, int]]
) -> None:
    job, attempt = new_attempt()
    curve = walk(STEPS)
    fill(database, attempt, curve)
    fill(database, attempt, within(curve, below=100), first_rank=1)  # rank 1 stalls at 99
    sweep(database, grace=30)
    with database.session() as session:
        state = session.scalars(select(CurveSeal).where(CurveSeal.job_id == job)).one()
    assert state.sealed_through == STEPS - 1 - MAX_LAG_STEPS
    fill(database, attempt, within(curve, above=100, below=200), first_rank=1)  # it resumes
    cache = SeriesCache()
    with database.session() as session:
        raw = job_curve(session, cache, job_id=job, name="loss")
        view, stats = job_view(session, cache, job_id=job, name="loss", points=1000)
    assert stats == summary("loss", raw) and 150 in raw.step
    shown_faithfully(view, raw, 1000)
    sweep(database, grace=30)
    blocks_match_the_curve(database, job)


def within(curve: Curve, *, below: int = 2**31, above: int = -1) -> Curve:
    """`curve`'s points at steps in [above, below)."""
    keep = (curve.step < below) & (curve.step >= above)
    return Curve(curve.step[keep], curve.time[keep], curve.value[keep])


@pytest.mark.parametrize("settled", [False, True], ids=["running", "finished"])
def test_a_late_point_into_a_sealed_range_shows_at_once_and_is_sealed_next(
    database: Database, new_attempt: Callable[..., tuple[int, int]], settled: bool
) -> None:
    job, attempt = new_attempt()
    curve = walk(STEPS)
    gap = curve.step != 30_000
    fill(database, attempt, Curve(curve.step[gap], curve.time[gap], curve.value[gap]))
    if settled:
        finish(database, attempt, seconds_ago=60)
    sweep(database, grace=30)
    with database.session() as session:
        before = session.scalars(select(CurveSeal).where(CurveSeal.job_id == job)).one()
    assert before.sealed_through > 30_000
    spike = Curve(np.array([30_000]), np.array([1.7e9]), np.array([1e6]))
    fill(database, attempt, spike)  # long after the seal (or the finish)
    for read in range(2):  # read before the builder's next pass, then after it rebuilt the block
        cache = SeriesCache()
        with database.session() as session:
            raw = job_curve(session, cache, job_id=job, name="loss")
            stored = rollups.load(session, job_id=job, name="loss", points=1000)
            assert (stored is not None) == (read == 1)  # raw from the late point's block on
            view, stats = job_view(session, cache, job_id=job, name="loss", points=1000)
        assert stats["max"] == 1e6 and stats == summary("loss", raw)
        assert 30_000 in view.step.tolist()
        shown_faithfully(view, raw, 1000)
        sweep(database, grace=30)
    with database.session() as session:
        after = session.scalars(select(CurveSeal).where(CurveSeal.job_id == job)).one()
        assert (
            rollups.lowest_change(session, attempts=[attempt], name="loss", after=after.watermark)
            is None
        )  # the rebuilt blocks cover the late point
    assert after.sealed_through >= before.sealed_through
    blocks_match_the_curve(database, job)


def test_a_new_attempt_replaces_the_steps_it_repeats(
    database: Database, new_attempt: Callable[..., tuple[int, int]]
) -> None:
    job, first = new_attempt()
    fill(database, first, walk(STEPS))
    finish(database, first)
    sweep(database, grace=1)
    with database.session() as session:
        resumed = Attempt(
            job_id=job, number=2, node_name="node-a", devices=[0], state="running", master_port=2
        )
        session.add(resumed)
        session.flush()
        second = resumed.id
    fill(database, second, walk(STEPS, seed=1, start=STEPS // 2))
    for _ in range(3):  # read as it runs, after the builder's pass, after it settled
        cache = SeriesCache()
        with database.session() as session:
            merged = job_curve(session, cache, job_id=job, name="loss")
            assert len(merged.step) == STEPS // 2 * 3
            view, stats = job_view(session, cache, job_id=job, name="loss", points=300)
        assert stats == summary("loss", merged)
        shown_faithfully(view, merged, 300)
        sweep(database, grace=1)
        finish(database, second)
    blocks_match_the_curve(database, job)
