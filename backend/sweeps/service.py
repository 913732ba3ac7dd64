"""Sweep operations: create (validating every trial), cancel, read; launching trials."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import redis
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.auth.models import User
from backend.auth.service import Principal, visible_or_raise
from backend.db import utcnow
from backend.jobs import service as jobs
from backend.jobs.models import Job
from backend.jobs.states import STOPPED, IllegalTransition, JobState
from backend.sweeps.models import Sweep
from backend.sweeps.schemas import SweepIn
from backend.sweeps.search import apply, expand
from backend.sweeps.writes import SWEEP_WRITES


class SweepNotFound(LookupError):
    pass


def create(
    session: Session,
    client: redis.Redis,
    *,
    principal: Principal,
    sweep_in: SweepIn,
    script_roots: Sequence[Path],
    admit: Callable[[int], None],
) -> Sweep:
    """Expand the search, check every trial's spec as a submission would, count the
    trials against the caller's submit limit (`admit` raises to refuse), store the sweep
    and launch its first trials."""
    try:
        settings = expand(
            sweep_in.parameters, method=sweep_in.method, trials=sweep_in.trials, seed=sweep_in.seed
        )
    except ValueError as err:
        raise _refused(("parameters",), str(err)) from None
    base = {**sweep_in.base, "name": sweep_in.name}
    for number, setting in enumerate(settings, start=1):
        try:
            spec = jobs.respec(base, apply(base, setting))
            jobs.check_entrypoint(spec, script_roots)
        except ValidationError as err:
            first = err.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            loc = _field_of(setting, where, first["msg"]) or ("base", *first["loc"])
            raise _refused(loc, f"trial {number}: {where}: {first['msg']}") from None
        except jobs.SpecRefused as err:
            raise _refused(("base", *err.loc), f"trial {number}: {err}") from None
    admit(len(settings))
    sweep = Sweep(
        name=sweep_in.name,
        owner_id=principal.user_id,
        state="running",
        config=sweep_in.model_dump(mode="json"),
        trials=settings,
        max_concurrency=sweep_in.max_concurrency,
    )
    session.add(sweep)
    session.commit()
    launch(session, client, sweep=sweep, script_roots=script_roots)
    return sweep


def trials_of(session: Session, sweep_id: int) -> list[Job]:
    """The sweep's launched trial jobs, by trial number."""
    query = select(Job).where(Job.sweep_id == sweep_id).order_by(Job.sweep_trial)
    return list(session.scalars(query))


def launch(
    session: Session, client: redis.Redis, *, sweep: Sweep, script_roots: Sequence[Path]
) -> list[Job]:
    """Submit the next trials while fewer than max_concurrency run; finish a sweep whose
    trials have all ended."""
    with SWEEP_WRITES.held(session.get_bind().engine.url):
        return _launch(session, client, sweep=sweep, script_roots=script_roots)


def _launch(
    session: Session, client: redis.Redis, *, sweep: Sweep, script_roots: Sequence[Path]
) -> list[Job]:
    if sweep.state != "running":
        return []
    trials = trials_of(session, sweep.id)
    launched = {job.sweep_trial for job in trials}
    active = sum(JobState(job.state) not in STOPPED for job in trials)
    pending = [n for n in range(1, len(sweep.trials) + 1) if n not in launched]
    owner = acting_as(session, sweep, "")
    config = SweepIn.model_validate(sweep.config)
    base = {**config.base, "name": sweep.name}
    started = []
    for number in pending[: max(0, sweep.max_concurrency - active)]:
        setting = sweep.trials[number - 1]
        changes = {**apply(base, setting), "name": f"{sweep.name} #{number}"}
        spec = jobs.respec(base, changes)
        started.append(
            jobs.submit(
                session,
                client,
                principal=owner,
                spec=spec,
                script_roots=script_roots,
                sweep=(sweep.id, number),
            )
        )
    if not pending and all(JobState(job.state) in STOPPED - {JobState.paused} for job in trials):
        sweep.state, sweep.finished_at = "finished", utcnow()
        session.commit()
    return started


def cancel(session: Session, client: redis.Redis, *, principal: Principal, sweep: Sweep) -> Sweep:
    """Cancel the sweep: no more trials start, and every trial still live is cancelled."""
    if sweep.state != "running":
        raise IllegalTransition(f"sweep {sweep.id} is {sweep.state}; it cannot be cancelled")
    sweep.state, sweep.finished_at = "cancelled", utcnow()
    session.commit()
    for job in trials_of(session, sweep.id):
        if JobState(job.state) in STOPPED - {JobState.paused}:
            continue
        try:
            jobs.stop(session, client, principal=principal, job=job, action="cancel")
        except IllegalTransition:  # already cancelling: it ends on its own
            session.rollback()
    return sweep


def visible_sweeps(session: Session, *, principal: Principal, limit: int = 100) -> list[Sweep]:
    """Sweeps the caller may see, newest first."""
    query = select(Sweep).order_by(Sweep.id.desc()).limit(limit)
    if not principal.is_admin:
        query = query.where(Sweep.owner_id == principal.user_id)
    return list(session.scalars(query))


def get_sweep(session: Session, *, principal: Principal, sweep_id: int) -> Sweep:
    """The sweep, if the caller may see it; otherwise SweepNotFound (never a hint it exists)."""
    missing = SweepNotFound(f"sweep {sweep_id} not found")
    return visible_or_raise(session, Sweep, sweep_id, principal=principal, missing=missing)


def acting_as(session: Session, sweep: Sweep, what: str) -> Principal:
    """The sweep's owner, as whom its trials are submitted and stopped (`what` names the
    sweep's part in their timeline: 'sweep 3's early-stopping rule')."""
    owner = session.get_one(User, sweep.owner_id)
    return Principal(
        user_id=owner.id,
        username=what or owner.username,
        role=owner.role,
        scopes=frozenset({"read", "submit"}),
        token_id=0,
        kind="sweep",
    )


def _field_of(setting: dict[str, object], where: str, message: str) -> tuple[str, str] | None:
    """The sweep parameter a refusal of a trial's spec is about, if it is about one."""
    for path in setting:
        if path == where or (path.startswith(f"{where}.") and path in message):
            return ("parameters", path)
    return None


def _refused(loc: tuple[str | int, ...], message: str) -> RequestValidationError:
    error = {"loc": ("body", *loc), "msg": message, "type": "value_error", "input": None}
    return RequestValidationError([error])
