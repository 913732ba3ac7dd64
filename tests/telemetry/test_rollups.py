"""Curve rollups: exact bucket extremes, settled jobs, staleness, queries served from them."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select, update

from backend.db import Database, utcnow
from backend.jobs.models import Attempt
from backend.migrate import upgrade
from backend.telemetry import rollups
from backend.telemetry.cache import SeriesCache
from backend.telemetry.curves import Curve, downsample, summary
from backend.telemetry.models import CurveRollup
from backend.telemetry.queries import job_curve, job_view, snapshot_series
from backend.telemetry.rollup_builder import build, sweep
from tests.telemetry.helpers import add_attempt

STEPS = 60_000


def walk(count: int, seed: int = 0, start: int = 0) -> Curve:
    step = np.arange(start, start + count, dtype=np.int64)
    value = np.random.default_rng(seed).standard_normal(count).cumsum()
    return Curve(step, 1.7e9 + step * 0.01, value)


def error(shown: Curve, full: Curve) -> float:
    """Mean distance of the line through `shown` from every point, over the value range."""
    drawn = np.interp(full.step, shown.step, shown.value)
    return float(np.abs(drawn - full.value).mean() / np.ptp(full.value))


def fill(db: Database, attempt_id: int, curve: Curve, ranks: int = 1) -> None:
    rows = [
        (attempt_id, rank, int(s), "loss", float(v) + rank, float(t))
        for rank in range(ranks)
        for s, t, v in zip(curve.step, curve.time, curve.value, strict=True)
    ]
    with db.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO metric_points (attempt_id, rank, step, name, value, time)"
            " VALUES (%s, %s, %s, %s, %s, %s)".replace(
                "%s", "?" if db.url.startswith("sqlite") else "%s"
            ),
            rows,
        )


def finish(db: Database, attempt_id: int, *, seconds_ago: float = 3600) -> None:
    with db.session() as session:
        session.execute(
            update(Attempt)
            .where(Attempt.id == attempt_id)
            .values(state="succeeded", finished_at=utcnow() - timedelta(seconds=seconds_ago))
        )


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=300),
    width=st.sampled_from([1, 2, 3, 7, 16]),
    first=st.integers(0, 40),
)
def test_bucket_extremes_are_each_buckets_first_min_and_max(
    values: list[float], width: int, first: int
) -> None:
    step = np.arange(first, first + len(values), dtype=np.int64)
    curve = Curve(step, step * 2.0, np.array(values))
    got = rollups.bucket_extremes(curve, width)
    for column, bucket in enumerate(sorted(set((step // width).tolist()))):
        inside = np.flatnonzero(step // width == bucket)
        low = inside[np.argmin(curve.value[inside])]
        high = inside[np.argmax(curve.value[inside])]
        expected = [step[low], step[low] * 2.0, curve.value[low]]
        expected += [step[high], step[high] * 2.0, curve.value[high]]
        assert got[:, column].tolist() == expected


def test_levels_double_and_short_or_non_finite_curves_get_a_marker() -> None:
    assert rollups.widths(STEPS) == [16, 32]
    assert rollups.widths(1_000_000)[0] == 16 and rollups.widths(1_000_000)[-1] == 512
    assert rollups.widths(rollups.MIN_STEPS - 1) == []
    (marker,) = rollups.rollup_rows(walk(100), job_id=1, name="loss", through=1)
    assert marker["width"] == 0 and marker["steps"] == 100
    broken = walk(STEPS)
    broken.value[5] = np.nan
    assert [r["width"] for r in rollups.rollup_rows(broken, job_id=1, name="l", through=1)] == [0]


def test_a_settled_long_job_is_served_from_rollups_with_exact_summary(
    database: Database, new_attempt: Callable[..., tuple[int, int]]
) -> None:
    job, attempt = new_attempt(state="succeeded")
    fill(database, attempt, walk(STEPS), ranks=2)
    finish(database, attempt)
    assert sweep(database, grace=30) == 1
    assert sweep(database, grace=30) == 0  # current now
    cache = SeriesCache()
    with database.session() as session:
        raw = job_curve(session, cache, job_id=job, name="loss")
        stored = rollups.load(session, job_id=job, name="loss", points=500)
        assert stored is not None and len(stored.step) < len(raw.step) // 10
        view, stats = job_view(session, cache, job_id=job, name="loss", points=500)
        widths = session.scalars(select(CurveRollup.width).where(CurveRollup.job_id == job))
        assert sorted(widths) == [16, 32]
    assert stats == summary("loss", raw)
    assert len(view.step) == 500
    # every point shown is a real point of the curve, first and last included
    where = np.searchsorted(raw.step, view.step)
    assert np.array_equal(raw.step[where], view.step)
    assert np.array_equal(raw.value[where], view.value)
    assert view.step[0] == raw.step[0] and view.step[-1] == raw.step[-1]
    # and it draws the curve as faithfully as LTTB over every point does
    direct = downsample(raw, 500)
    assert error(view, raw) <= 1.1 * error(direct, raw)


def test_unsettled_jobs_wait_and_a_new_attempt_makes_rollups_stale(
    database: Database, new_attempt: Callable[..., tuple[int, int]]
) -> None:
    job, first = new_attempt()
    fill(database, first, walk(STEPS))
    assert sweep(database, grace=30) == 0  # still running
    finish(database, first, seconds_ago=5)
    assert sweep(database, grace=30) == 0  # inside the grace period
    assert sweep(database, grace=1) == 1
    with database.session() as session:
        assert rollups.load(session, job_id=job, name="loss", points=100) is not None
        assert rollups.load(session, job_id=job, name="loss", points=0) is None
        # a point budget finer than the finest level is read raw
        assert rollups.load(session, job_id=job, name="loss", points=STEPS) is None
        resumed = Attempt(
            job_id=job, number=2, node_name="node-a", devices=[0], state="running", master_port=2
        )
        session.add(resumed)
        session.flush()
        second = resumed.id
    fill(database, second, walk(STEPS, seed=1, start=STEPS // 2))
    with database.session() as session:
        assert rollups.load(session, job_id=job, name="loss", points=100) is None
    finish(database, second)
    assert sweep(database, grace=1) == 1
    cache = SeriesCache()
    with database.session() as session:
        merged = job_curve(session, cache, job_id=job, name="loss")
        assert len(merged.step) == STEPS // 2 * 3
        view, stats = job_view(session, cache, job_id=job, name="loss", points=300)
        through = set(session.scalars(select(CurveRollup.through_attempt_id)))
    assert through == {second}
    assert stats == summary("loss", merged)
    assert view.step[-1] == merged.step[-1] and len(view.step) == 300


def test_short_curves_stay_raw(
    database: Database, new_attempt: Callable[..., tuple[int, int]]
) -> None:
    job, attempt = new_attempt(state="succeeded")
    fill(database, attempt, walk(500))
    finish(database, attempt)
    with database.session() as session:
        assert build(session, job_id=job, through=attempt) == 1
    cache = SeriesCache()
    with database.session() as session:
        assert rollups.load(session, job_id=job, name="loss", points=100) is None
        view, _ = job_view(session, cache, job_id=job, name="loss", points=100)
        raw = job_curve(session, cache, job_id=job, name="loss")
    assert np.array_equal(view.step, downsample(raw, 100).step)


@pytest.mark.parametrize("rank", [0, 1])
def test_a_rank_is_read_raw(
    database: Database, new_attempt: Callable[..., tuple[int, int]], rank: int
) -> None:
    job, attempt = new_attempt(state="succeeded")
    fill(database, attempt, walk(rollups.MIN_STEPS), ranks=2)
    finish(database, attempt)
    sweep(database, grace=0)
    cache = SeriesCache()
    with database.session() as session:
        view, stats = job_view(session, cache, job_id=job, name="loss", points=0, rank=rank)
    assert len(view.step) == rollups.MIN_STEPS
    assert stats["final"] == pytest.approx(walk(rollups.MIN_STEPS).value[-1] + rank)


def test_a_job_snapshot_is_downsampled_per_rank_keeping_a_spike_and_aligned_steps(
    database: Database, new_attempt: Callable[..., tuple[int, int]]
) -> None:
    job, attempt = new_attempt()
    curve = walk(10_000)
    curve.value[7_777] = 1e6  # one rank diverges for one step: rank 1 below gets +1
    fill(database, attempt, curve, ranks=2)
    with database.session() as session:
        got = snapshot_series(session, SeriesCache(), job_id=job, steps=2000)["loss"]
    steps = np.array(got["step"])
    ranks = np.array(got["rank"])
    assert set(ranks.tolist()) == {0, 1}
    assert np.array_equal(steps[ranks == 0], steps[ranks == 1])  # the same x for every rank
    assert len(steps[ranks == 0]) <= 2000
    assert 7_777 in steps and 0 in steps and 9_999 in steps
    assert got["value"][got["step"].index(7_777)] == 1e6


def test_a_short_job_snapshot_holds_every_point(
    database: Database, new_attempt: Callable[..., tuple[int, int]]
) -> None:
    job, attempt = new_attempt()
    fill(database, attempt, walk(1500), ranks=3)
    with database.session() as session:
        got = snapshot_series(session, SeriesCache(), job_id=job, steps=2000)["loss"]
    assert len(got["step"]) == 4500


def test_two_processes_building_one_job_leave_one_set_of_rollups(
    postgres_url: str,
) -> None:
    upgrade(postgres_url)
    database = Database(postgres_url)
    try:
        job, attempt = add_attempt(database, state="succeeded")
        fill(database, attempt, walk(rollups.MIN_STEPS))
        finish(database, attempt)
        first = database.sessions()
        build(first, job_id=job, through=attempt)  # written, not committed yet
        racer = concurrent.futures.ThreadPoolExecutor(1).submit(sweep, database, grace=0)
        time.sleep(0.5)  # the racer waits on the first builder's uncommitted rows
        first.commit()
        first.close()
        assert racer.result(timeout=60) == 0  # it lost the race and says so, no error
        with database.session() as session:
            widths = list(
                session.scalars(select(CurveRollup.width).where(CurveRollup.job_id == job))
            )
        assert widths == [16]
    finally:
        database.dispose()
