"""The run table's one query: filter, sort and page jobs by settings and metric summaries.

The filters and the keys come out of the database as a few small columns per job (the
spec paths asked for are extracted by the database, never the whole spec), the metric
values from metric_summaries; sorting, grouping and paging happen on those, and only the
page's jobs are loaded in full. No curve is read.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from backend.auth.service import Principal
from backend.jobs.models import Job
from backend.jobs.views import describe_jobs
from backend.telemetry.models import MetricSummary
from backend.telemetry.series import directions
from backend.telemetry.series.compare import metric_direction, spec_diff

PATH = re.compile(r"^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,5}$")
SORT = re.compile(r"^(-?)(id|name|state|created_at|(spec|final|best):(.{1,200}))$")
#: the newest visible jobs whose spec paths and metric names the pickers offer
SUGGEST_FROM = 200
MAX_GROUPS = 500


class BadQuery(ValueError):
    """A query the run table cannot answer; carries the parameter it is about."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class RunQuery:
    columns: Sequence[str] = ()
    metrics: Sequence[str] = ()
    sort: str = "-id"
    states: Sequence[str] = ()
    tag: str | None = None
    text: str | None = None
    group: str | None = None
    limit: int = 50
    offset: int = 0


@dataclass
class _Key:
    """One matching job's sort and group keys."""

    id: int
    values: dict[str, Any] = field(default_factory=dict)


def table(session: Session, *, principal: Principal, query: RunQuery) -> dict[str, Any]:
    """The page of rows, the total, the groups and what the pickers offer."""
    for path in [*query.columns, *([query.group] if query.group else [])]:
        _check_path(path, "columns" if path in query.columns else "group")
    descending, by, metric_part = _sort(query.sort)
    keys = _matching(session, principal, query, by)
    sort_metric = metric_part[1] if metric_part else None
    wanted = list(dict.fromkeys([*query.metrics, *([sort_metric] if sort_metric else [])]))
    whole = query.group is not None or sort_metric is not None
    summaries = _summaries(session, [k.id for k in keys] if not whole else None, wanted)
    if metric_part:
        kind, name = metric_part
        for key in keys:
            found = summaries.get((key.id, name))
            key.values[by] = getattr(found, kind) if found else None
    keys.sort(key=lambda k: k.id, reverse=True)
    keys.sort(key=lambda k: _order(k.values.get(by, k.id), descending))
    keys.sort(key=lambda k: k.values.get(by, k.id) is None)  # missing last either way
    page = keys[query.offset : query.offset + query.limit]
    if not whole:
        summaries = _summaries(session, [k.id for k in page], wanted)
    jobs = {j.id: j for j in session.scalars(select(Job).where(Job.id.in_([k.id for k in page])))}
    views = {v.id: v for v in describe_jobs(session, [jobs[k.id] for k in page])}
    rows = [
        {
            "job": views[k.id],
            "settings": {c: _at(jobs[k.id].spec, c) for c in query.columns},
            "metrics": {
                name: _metric(summaries[(k.id, name)])
                for name in query.metrics
                if (k.id, name) in summaries
            },
        }
        for k in page
    ]
    declared = directions.declared(session, job_ids=[k.id for k in page])
    return {
        "total": len(keys),
        "offset": query.offset,
        "rows": rows,
        "groups": _groups(keys, query, summaries) if query.group else None,
        "directions": {m: metric_direction(m, declared) for m in query.metrics},
        **_suggestions(session, principal),
    }


def _check_path(path: str, name: str) -> None:
    if not PATH.match(path):
        raise BadQuery(name, f"{path[:80]!r} is not a spec path like hyperparameters.lr")


def _sort(sort: str) -> tuple[bool, str, tuple[str, str] | None]:
    """(descending, the key's name, (final|best, metric) when it sorts by a metric)."""
    found = SORT.match(sort)
    if not found:
        raise BadQuery(
            "sort", "sort is id, name, state, created_at, spec:<path>, final:<m> or best:<m>"
        )
    descending, by = found.group(1) == "-", found.group(2)
    if found.group(3) == "spec":
        _check_path(found.group(4), "sort")
    metric = (found.group(3), found.group(4)) if found.group(3) in ("final", "best") else None
    return descending, by, metric


def _matching(session: Session, principal: Principal, query: RunQuery, by: str) -> list[_Key]:
    """Every visible job the filters keep, with its sort and group keys."""
    paths = {f"spec:{query.group}": query.group} if query.group else {}
    if by.startswith("spec:"):
        paths[by] = by.removeprefix("spec:")
    plain = {"name": Job.name, "state": Job.state, "created_at": Job.created_at}
    extra = [plain[by]] if by in plain else []
    columns = [Job.spec[tuple(p.split("."))] for p in paths.values()]
    statement = select(Job.id, Job.spec["tags"], *extra, *columns)
    if not principal.is_admin:
        statement = statement.where(Job.owner_id == principal.user_id)
    if query.states:
        statement = statement.where(Job.state.in_(list(query.states)))
    if query.text:
        needle = query.text.strip().lower()
        matches = [func.lower(Job.name).contains(needle, autoescape=True)]
        if needle.lstrip("#").isdigit():
            matches.append(Job.id == int(needle.lstrip("#")))
        statement = statement.where(or_(*matches))
    keys = []
    for row in session.execute(statement):
        tags = row[1] or []
        if query.tag and query.tag not in tags:
            continue
        key = _Key(row[0])
        if extra:
            key.values[by] = row[2]
        for name, value in zip(paths, row[2 + len(extra) :], strict=True):
            key.values[name] = value
        keys.append(key)
    return keys


def _summaries(
    session: Session, job_ids: list[int] | None, names: list[str]
) -> dict[tuple[int, str], MetricSummary]:
    """(job, metric) → summary, of the given jobs (None: of every job; the caller filters)."""
    if not names or job_ids == []:
        return {}
    statement = select(MetricSummary).where(MetricSummary.name.in_(names))
    if job_ids is not None:
        statement = statement.where(MetricSummary.job_id.in_(job_ids))
    return {(s.job_id, s.name): s for s in session.scalars(statement)}


def _order(value: Any, descending: bool) -> tuple[int, Any]:
    """A key that orders numbers, then text, then anything else (as JSON) in either direction."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        text = json.dumps(value, sort_keys=True, default=str)
        return (2, _flip_text(text) if descending else text)
    if isinstance(value, str):
        return (1, _flip_text(value) if descending else value)
    return (0, -value if descending else value)


def _flip_text(text: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in text) + (1,)


def _at(spec: dict[str, Any], path: str) -> Any:
    value: Any = spec
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _metric(summary: MetricSummary) -> dict[str, Any]:
    return {
        "final": summary.final,
        "final_step": summary.final_step,
        "best": summary.best,
        "best_step": summary.best_step,
    }


def _groups(
    keys: list[_Key], query: RunQuery, summaries: dict[tuple[int, str], MetricSummary]
) -> list[dict[str, Any]]:
    """Each value of the group setting among the matching jobs, in sort order, with spreads."""
    by_value: dict[str, tuple[Any, list[int]]] = {}
    for key in keys:
        value = key.values.get(f"spec:{query.group}")
        by_value.setdefault(json.dumps(value, sort_keys=True), (value, []))[1].append(key.id)
    groups = []
    for value, ids in list(by_value.values())[:MAX_GROUPS]:
        spreads: dict[str, dict[str, Any]] = {}
        for name in query.metrics:
            for kind in ("final", "best"):
                found = [getattr(summaries[(i, name)], kind) for i in ids if (i, name) in summaries]
                numbers = [v for v in found if v is not None and math.isfinite(v)]
                if numbers:
                    spreads.setdefault(name, {})[kind] = _spread(numbers)
        groups.append({"value": value, "count": len(ids), "job_ids": ids, "metrics": spreads})
    return groups


def _spread(values: list[float]) -> dict[str, Any]:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def _suggestions(session: Session, principal: Principal) -> dict[str, list[str]]:
    """Spec paths and metric names of the newest visible jobs, for the column pickers."""
    newest = select(Job.id, Job.spec).order_by(Job.id.desc()).limit(SUGGEST_FROM)
    if not principal.is_admin:
        newest = newest.where(Job.owner_id == principal.user_id)
    found = session.execute(newest).all()
    differ, same = spec_diff([spec for _, spec in found]) if found else ({}, {})
    names = session.scalars(
        select(MetricSummary.name)
        .where(MetricSummary.job_id.in_([job_id for job_id, _ in found]))
        .distinct()
        .order_by(MetricSummary.name)
    )
    return {"metric_names": list(names), "setting_paths": sorted({*differ, *same})}
