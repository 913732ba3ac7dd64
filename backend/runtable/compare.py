"""Comparing jobs: spec differences, metric summaries, aligned downsampled curves and CSV."""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from backend.health.efficiency import device_hours_at, job_efficiency
from backend.jobs.models import Job
from backend.telemetry.series import directions, reads
from backend.telemetry.series.cache import SeriesCache
from backend.telemetry.series.curves import Curve, Direction, XAxis, direction
from backend.telemetry.series.queries import job_view
from backend.usage.accounting import AttemptUsage, attempt_usage

#: spec keys that name a run rather than change how it trains
IDENTITY_KEYS = frozenset({"name"})


def metric_names(session: Session, *, jobs: Sequence[Job]) -> list[str]:
    """Every metric any of the jobs reported, sorted."""
    return sorted({n for job in jobs for n in reads.metric_names(session, job_id=job.id)})


def compare(
    session: Session,
    cache: SeriesCache,
    *,
    jobs: Sequence[Job],
    metrics: Sequence[str],
    points: int,
    x: XAxis,
) -> dict[str, Any]:
    """Spec differences, per-metric summaries and aligned downsampled curves of the jobs."""
    ids = [job.id for job in jobs]
    declared = directions.declared(session, job_ids=ids)
    summaries: dict[str, dict[str, Any]] = {}
    curves: dict[str, dict[str, Any]] = {}
    usages = _usages(session, ids) if x == "device_hours" else {}
    for name in metrics:
        views = {
            i: job_view(
                session,
                cache,
                job_id=i,
                name=name,
                points=points,
                x=x,
                declared=declared.get(i, {}).get(name),
            )
            for i in ids
        }
        summaries[name] = {str(i): views[i][1] for i in ids}
        curves[name] = aligned({i: views[i][0] for i in ids}, x, usages)
    differ, same = spec_diff([j.spec for j in jobs])
    return {
        "metrics": list(metrics),
        "directions": {name: metric_direction(name, declared) for name in metrics},
        "spec_diff": differ,
        "spec_same": same,
        "summary": summaries,
        "curves": curves,
        "efficiency": {str(j.id): job_efficiency(session, j).as_dict() for j in jobs},
    }


def _usages(session: Session, job_ids: list[int]) -> dict[int, list[AttemptUsage]]:
    """Each job's attempts with their devices and run spans (the device-hours axis)."""
    usages: dict[int, list[AttemptUsage]] = {i: [] for i in job_ids}
    for usage in attempt_usage(session, job_ids=job_ids):
        usages[usage.job_id].append(usage)
    return usages


def metric_direction(name: str, declared: dict[int, dict[str, str]]) -> Direction:
    """A metric's direction across jobs: the first declaration any of them made, else the rule."""
    said = next((d[name] for d in declared.values() if name in d), None)
    return direction(name, said)


def aligned(
    curves: dict[int, Curve], x: XAxis, usages: dict[int, list[AttemptUsage]] | None = None
) -> dict[str, Any]:
    """One shared x column and per job a value column (null: no point there)."""
    used = usages or {}
    xs_of = {job_id: _xs(curve, x, used.get(job_id, [])) for job_id, curve in curves.items()}
    xs = np.unique(np.concatenate(list(xs_of.values()))) if xs_of else np.empty(0)
    columns: dict[str, list[float | None]] = {}
    for job_id, curve in curves.items():
        column: list[float | None] = [None] * len(xs)
        at = np.searchsorted(xs, xs_of[job_id]).tolist()
        for i, value in zip(at, curve.value.tolist(), strict=True):
            column[i] = value
        columns[str(job_id)] = column
    starts = {str(i): float(c.time.min()) if len(c.time) else None for i, c in curves.items()}
    return {"x": xs.tolist(), "values": columns, "starts": starts}


def _xs(curve: Curve, x: XAxis, usages: list[AttemptUsage]) -> np.ndarray:
    # by time, seconds since the job's own first point (to the ms): runs started apart overlay;
    # by wall, the clock (to the ms): runs side by side as they ran; by device-hours, what the
    # job had used by each point (a wide run's x grows faster)
    if x == "step":
        return curve.step
    if not len(curve.time):
        return curve.time
    if x == "device_hours":
        return np.round(np.array(device_hours_at(usages, curve.time.tolist())), 6)
    if x == "wall":
        return np.round(curve.time, 3)
    return np.round(curve.time - curve.time.min(), 3)


def spec_diff(specs: Sequence[dict[str, Any]]) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """Differing dotted spec keys (a value per spec, None: absent) and same ones (the value)."""
    flat = [flatten(spec) for spec in specs]
    keys = sorted({k for f in flat for k in f} - IDENTITY_KEYS)
    differ: dict[str, list[Any]] = {}
    same: dict[str, Any] = {}
    for key in keys:
        values = [f.get(key) for f in flat]
        shown = {json.dumps(v, sort_keys=True) for v in values}
        if all(key in f for f in flat) and len(shown) == 1:
            same[key] = values[0]
        else:
            differ[key] = values
    return differ, same


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value} if prefix else {}


def csv_lines(
    session: Session, cache: SeriesCache, *, jobs: Sequence[tuple[int, str]], name: str, x: XAxis
) -> Iterator[str]:
    """One metric of (job id, job name)s at every step, aligned on x, as CSV: x, a column each."""
    views = {i: job_view(session, cache, job_id=i, name=name, points=0, x=x)[0] for i, _ in jobs}
    usages = _usages(session, [i for i, _ in jobs]) if x == "device_hours" else {}
    table = aligned(views, x, usages)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")  # None is written as an empty cell
    axis = {"step": "step", "time": "seconds", "wall": "unix_time", "device_hours": "device_hours"}[
        x
    ]
    writer.writerow([axis, *(f"#{i} {n}" for i, n in jobs)])
    rows = zip(table["x"], *(table["values"][str(i)] for i, _ in jobs), strict=True)
    while chunk := list(itertools.islice(rows, 10_000)):
        writer.writerows(chunk)
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    yield buffer.getvalue()


def csv_filename(*, jobs: Sequence[Job], name: str) -> str:
    """compare-3-5-val_loss.csv: the job ids and the metric, safe in a header."""
    ids = "-".join(str(j.id) for j in jobs)
    return f"compare-{ids}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.csv"
