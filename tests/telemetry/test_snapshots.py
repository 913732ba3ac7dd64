"""`job:<id>` snapshots: every metric per rank, downsampled to a step budget over the whole run."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from backend.db import Database
from backend.telemetry.series.cache import SeriesCache
from backend.telemetry.series.queries import snapshot_series
from tests.telemetry.curve_data import fill, walk


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
