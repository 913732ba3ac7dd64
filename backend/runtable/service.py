"""The run table's one query: filter, sort and page jobs by settings and metric summaries.

The filters and the keys come out of the database as a few small columns per job (the
spec paths asked for are extracted by the database, never the whole spec), the metric
values from metric_summaries; sorting, grouping and paging happen on those, and only the
page's jobs are loaded in full. No curve is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from backend.auth.service import Principal
from backend.jobs.models import Job
from backend.jobs.views import describe_jobs
from backend.runtable.compare import flatten, metric_direction
from backend.runtable.keys import KEPT
from backend.telemetry.models import MetricSummary
from backend.telemetry.series import directions

PATH = re.compile(r"^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,5}$")
SORT = re.compile(r"^(-?)(id|name|state|created_at|(spec|final|best):(.{1,200}))$")
#: the newest visible jobs whose spec paths and metric names the pickers offer
SUGGEST_FROM = 50
MAX_GROUPS = 500
KINDS = ("final", "best")
GROUP = "group"  # the group key's name among a row's values (sort keys have a colon or are plain)


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
    archived: str = "hide"  # hide, all or only (as the board's)
    sweep: int | None = None
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
    if metric_part:
        values = _values(session, metric_part[1], [metric_part[0]])
        for key in keys:
            key.values[by] = values.get((key.id, metric_part[1]), (None,))[0]
    keys.sort(key=lambda k: k.id, reverse=True)
    keys.sort(key=lambda k: _order(k.values.get(by, k.id), descending))
    keys.sort(key=lambda k: k.values.get(by, k.id) is None)  # missing last either way
    page = keys[query.offset : query.offset + query.limit]
    summaries = _summaries(session, [k.id for k in page], list(query.metrics))
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
        "groups": _groups(session, keys, query) if query.group else None,
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
    """Every visible job the filters keep, with its sort key."""
    plain = {"name": Job.name, "state": Job.state, "created_at": Job.created_at}
    extra: list[Any] = [plain[by]] if by in plain else []
    statement = select(Job.id, Job.updated_at, *extra).where(*_conditions(principal, query))
    keys, stamps = [], {}
    for row in session.execute(statement):
        key = _Key(row[0])
        stamps[key.id] = row[1]
        if extra:
            key.values[by] = row[2]
        keys.append(key)
    # spec paths come from the values kept between requests (keys.py), not a JSON parse each
    wanted = {by: by.removeprefix("spec:")} if by.startswith("spec:") else {}
    if query.group:
        wanted[GROUP] = query.group
    for name, path in wanted.items():
        found = KEPT.values(session, path, stamps)
        for key in keys:
            key.values[name] = found.get(key.id)
    return keys


def _conditions(principal: Principal, query: RunQuery) -> list[ColumnElement[bool]]:
    """The filters as SQL: visible to the caller, archived or not, of a sweep, in a state,
    matching the text (name, notes or #id) and tag."""
    conditions: list[ColumnElement[bool]] = []
    if not principal.is_admin:
        conditions.append(Job.owner_id == principal.user_id)
    if query.states:
        conditions.append(Job.state.in_(list(query.states)))
    if query.archived != "all":
        conditions.append(Job.archived.is_(query.archived == "only"))
    if query.sweep is not None:
        conditions.append(Job.sweep_id == query.sweep)
    if query.text:
        needle = query.text.strip().lower()
        matches = [
            func.lower(Job.name).contains(needle, autoescape=True),
            func.lower(func.coalesce(Job.notes, "")).contains(needle, autoescape=True),
        ]
        if needle.lstrip("#").isdigit():
            matches.append(Job.id == int(needle.lstrip("#")))
        conditions.append(or_(*matches))
    if query.tag:  # tags are plain (no quotes): '"tag"' in the list's JSON text is the tag
        tags = Job.spec["tags"].as_string()
        conditions.append(tags.contains(f'"{query.tag}"', autoescape=True))
    return conditions


def _summaries(
    session: Session, job_ids: list[int], names: list[str]
) -> dict[tuple[int, str], MetricSummary]:
    """(job, metric) → summary, of the page's jobs."""
    if not names or not job_ids:
        return {}
    statement = select(MetricSummary).where(
        MetricSummary.name.in_(names), MetricSummary.job_id.in_(job_ids)
    )
    return {(s.job_id, s.name): s for s in session.scalars(statement)}


def _values(
    session: Session, names: str | list[str], kinds: list[str]
) -> dict[tuple[int, str], tuple[float | None, ...]]:
    """(job, metric) → those columns (final, best) of every job's summary of the metrics.

    Plain tuples of two or three columns: 10,000 summary objects would cost more than
    the query.
    """
    names = [names] if isinstance(names, str) else names
    columns = [getattr(MetricSummary, kind) for kind in kinds]
    statement = select(MetricSummary.job_id, MetricSummary.name, *columns).where(
        MetricSummary.name.in_(names)
    )
    return {(row[0], row[1]): tuple(row[2:]) for row in session.execute(statement)}


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


def _groups(session: Session, keys: list[_Key], query: RunQuery) -> list[dict[str, Any]]:
    """Each value of the group setting among the matching jobs, with spreads of the metrics."""
    members: dict[Any, tuple[Any, list[int]]] = {}
    for key in keys:
        value = key.values[GROUP]
        hashable = ("json", json.dumps(value)) if isinstance(value, dict | list) else value
        members.setdefault(hashable, (value, []))[1].append(key.id)
    values = _values(session, list(query.metrics), list(KINDS)) if query.metrics else {}
    groups = []
    for value, ids in members.values():
        spreads: dict[str, dict[str, Any]] = {}
        for name in query.metrics:
            found = np.array([values.get((i, name), (None, None)) for i in ids], dtype=float)
            for index, kind in enumerate(KINDS):
                spread = _spread(found[:, index])
                if spread is not None:
                    spreads.setdefault(name, {})[kind] = spread
        groups.append({"value": value, "count": len(ids), "metrics": spreads})
    groups.sort(key=lambda g: (g["value"] is None, _order(g["value"], False)))
    return groups[:MAX_GROUPS]


def _spread(column: np.ndarray) -> dict[str, Any] | None:
    """Mean ± sample standard deviation (0 for one value), min and max of the finite values."""
    finite = column[np.isfinite(column)]
    if not len(finite):
        return None
    std = float(finite.std(ddof=1)) if len(finite) > 1 else 0.0
    return {
        "mean": float(finite.mean()),
        "std": std,
        "min": float(finite.min()),
        "max": float(finite.max()),
        "n": len(finite),
    }


def _suggestions(session: Session, principal: Principal) -> dict[str, list[str]]:
    """Spec paths and metric names of the newest visible jobs, for the column pickers."""
    newest = select(Job.id, Job.spec).order_by(Job.id.desc()).limit(SUGGEST_FROM)
    if not principal.is_admin:
        newest = newest.where(Job.owner_id == principal.user_id)
    found = session.execute(newest).all()
    paths = sorted({path for _, spec in found for path in flatten(spec)})
    names = session.scalars(
        select(MetricSummary.name)
        .where(MetricSummary.job_id.in_([job_id for job_id, _ in found]))
        .distinct()
        .order_by(MetricSummary.name)
    )
    return {"metric_names": list(names), "setting_paths": paths}
