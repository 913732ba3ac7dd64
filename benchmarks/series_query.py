"""Series query: 10 runs x 1,000,000 points, each downsampled to 2,000 points; and compared.

    python -m benchmarks.series_query [--runs 10] [--points 1000000] [--running] [--url URL]

On a temporary SQLite file, or on the empty database at --url (PostgreSQL).

Baseline: the pre-existing per-step SQL series (backend/telemetry/series/reads.py) of every run,
not downsampled. Raw cold: the series cache is empty and there are no rollups (a running
job). Raw warm: the cache holds the runs and only asks the database for each run's newest
row id. Rollups: the runs have finished and their curve rollups were built (the build is
timed too); a fresh Database and an empty cache, as after an API restart.

--running: the runs keep running. Raw cold: the series route's path in a fresh process
before the rollup builder's first pass (every row read once). Then the builder seals the
runs (timed), each run logs TAIL more steps, and a fresh process asks again: sealed
blocks plus the raw tail. Last, the step each run skipped LATE steps before its end comes
late, into its last sealed block: before the builder's next pass that block and what
follows are read raw; the next pass (timed) re-seals them.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from backend.db import Database
from backend.jobs.models import Job
from backend.migrate import upgrade
from backend.runtable.compare import compare
from backend.telemetry import series
from backend.telemetry.series.cache import SeriesCache
from backend.telemetry.series.curves import downsample
from backend.telemetry.series.queries import job_curve, job_view
from backend.telemetry.series.rollup_builder import sweep
from tests.telemetry.helpers import add_attempt

BUDGET = 2000
#: the compare route's default point budget per job
COMPARE_POINTS = 1000
#: steps each running run logs after the builder's pass, before the query
TAIL = 1000
#: steps before the end of a running run where its late point lands
LATE = 5000


def fill(db: Database, attempt: int, count: int, seed: int, start: int = 0, rank: int = 0) -> None:
    values = np.random.default_rng(seed).standard_normal(count).cumsum()
    steps = range(start, start + count)
    rows = (
        (attempt, rank, s, "loss", float(v), 1.7e9 + s) for s, v in zip(steps, values, strict=True)
    )
    with db.engine.begin() as conn:
        if db.url.startswith("sqlite"):
            conn.exec_driver_sql(
                "INSERT INTO metric_points (attempt_id, rank, step, name, value, time)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                list(rows),
            )
            return
        conn.exec_driver_sql(  # one statement: executemany of a million rows is slow here
            "INSERT INTO metric_points (attempt_id, rank, step, name, value, time)"
            " SELECT %s, %s, s, 'loss', v, 1.7e9 + s FROM unnest(%s::int[], %s::float8[]) t(s, v)",
            (attempt, rank, list(steps), values.tolist()),
        )


def query_all(db: Database, cache: SeriesCache, jobs: list[int]) -> float:
    started = time.perf_counter()
    with db.session() as session:
        for job in jobs:
            curve = downsample(job_curve(session, cache, job_id=job, name="loss"), BUDGET)
            assert len(curve.step) == BUDGET
    return time.perf_counter() - started


def fresh_views(url: str, jobs: list[int], again: int = 5) -> tuple[float, float]:
    """The first query of a fresh process (new engine, empty cache), and the median of more."""
    fresh = Database(url)
    first = query_views(fresh, jobs)
    more = statistics.median([query_views(fresh, jobs) for _ in range(again)] or [first])
    fresh.dispose()
    return first, more


def fresh_compare(url: str, jobs: list[int], again: int = 5) -> tuple[float, float]:
    """GET /api/series/compare's work for all runs in a fresh process, and the median of more."""
    fresh = Database(url)

    def once() -> float:
        cache = SeriesCache()
        started = time.perf_counter()
        with fresh.session() as session:
            chosen = [session.get_one(Job, job) for job in jobs]
            found = compare(
                session, cache, jobs=chosen, metrics=["loss"], points=COMPARE_POINTS, x="step"
            )
            assert len(found["curves"]["loss"]["values"]) == len(jobs)
        return time.perf_counter() - started

    first = once()
    more = statistics.median([once() for _ in range(again)] or [first])
    fresh.dispose()
    return first, more


def running(db: Database, url: str, jobs: list[tuple[int, int]], points: int) -> None:
    """The --running rows: before the builder's first pass, sealed plus a raw tail, a late point."""
    ids = [job for job, _ in jobs]
    db.dispose()
    fresh = Database(url)
    cold = query_views(fresh, ids)
    fresh.dispose()
    started = time.perf_counter()
    sweep(db, grace=0, limit=len(jobs))
    built = time.perf_counter() - started
    for run, (_, attempt) in enumerate(jobs):
        fill(db, attempt, TAIL, seed=100 + run, start=points)
    db.dispose()
    first, again = fresh_views(url, ids, again=3)
    compared, _ = fresh_compare(url, ids, again=0)
    for _, attempt in jobs:  # the step each run skipped comes now, long after its seal
        fill(db, attempt, 1, seed=7, start=points - LATE)
    db.dispose()
    late, _ = fresh_views(url, ids, again=0)
    started = time.perf_counter()
    sweep(db, grace=0, limit=len(jobs))
    resealed = time.perf_counter() - started
    db.dispose()
    healed, _ = fresh_views(url, ids, again=0)
    print(f"{len(jobs)} running runs x {points:,} points (+{TAIL} after the builder's pass)")
    print(f"-> {BUDGET} points each ({db.engine.dialect.name}), fresh process each time")
    print(f"  raw, before the builder's first pass     {cold * 1000:>9.0f} ms  (1.00x)")
    report(
        cold,
        ("sealed blocks + raw tail", first),
        ("sealed blocks + raw tail (median of 3)", again),
        (f"compare of all runs, {COMPARE_POINTS} points each", compared),
        ("a late point in each run, before rebuild", late),
        ("the same after the builder's next pass", healed),
    )
    print(f"  the builder's first pass over all runs: {built:.1f} s")
    print(f"  its next pass (re-seals the late points' blocks): {resealed:.1f} s")


def report(baseline: float, *rows: tuple[str, float]) -> None:
    for label, took in rows:
        print(f"  {label:40s} {took * 1000:>9.0f} ms  ({baseline / took:.1f}x faster)")


def query_views(db: Database, jobs: list[int]) -> float:
    """The series route's path: rollups where the job has them, else raw through a cache."""
    cache = SeriesCache()
    started = time.perf_counter()
    with db.session() as session:
        for job in jobs:
            curve, _ = job_view(session, cache, job_id=job, name="loss", points=BUDGET)
            assert len(curve.step) == BUDGET
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--running", action="store_true", help="the runs have not finished")
    parser.add_argument("--url", help="an empty database (default: a temporary SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{Path(tmp) / 'series.db'}"
        upgrade(url)
        db = Database(url)
        jobs, attempts = [], []
        for run in range(args.runs):
            job, attempt = add_attempt(db)
            if args.running:  # a step left out, to come late
                fill(db, attempt, args.points - LATE, seed=run)
                fill(db, attempt, LATE - 1, seed=run, start=args.points - LATE + 1)
            else:
                fill(db, attempt, args.points, seed=run)
            jobs.append(job)
            attempts.append(attempt)
        if args.running:
            running(db, url, list(zip(jobs, attempts, strict=True)), args.points)
            return
        started = time.perf_counter()
        with db.session() as session:
            for job in jobs:
                series.series(session, job_id=job, name="loss")
        baseline = time.perf_counter() - started
        cache = SeriesCache(max_points=args.runs * args.points)
        cold = query_all(db, cache, jobs)
        warm = statistics.median(query_all(db, cache, jobs) for _ in range(5))
        with db.engine.begin() as conn:
            conn.exec_driver_sql("UPDATE attempts SET finished_at = created_at")
        started = time.perf_counter()
        sweep(db, grace=0, limit=args.runs)
        built = time.perf_counter() - started
        db.dispose()
        first, again = fresh_views(url, jobs)
        compared, compared_again = fresh_compare(url, jobs)
        dialect = db.engine.dialect.name
        print(f"{args.runs} runs x {args.points:,} points -> {BUDGET} points each ({dialect})")
        print(f"  baseline SQL per-step series, raw        {baseline * 1000:>9.0f} ms  (1.00x)")
        report(
            baseline,
            ("raw, cold cache + LTTB", cold),
            ("raw, warm cache + LTTB (median of 5)", warm),
            ("rollups + LTTB, fresh process", first),
            ("rollups + LTTB (median of 5)", again),
            (f"compare, {COMPARE_POINTS} points each, fresh process", compared),
            (f"compare, {COMPARE_POINTS} points each (median of 5)", compared_again),
        )
        print(f"  building the rollups of all runs once, after they finished: {built:.1f} s")


if __name__ == "__main__":
    main()
