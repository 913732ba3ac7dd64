"""Job operations behind the REST routes: submit, read, cancel."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis
from pydantic import ValidationError
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from backend.auth.service import Principal, visible_or_raise
from backend.jobs import script_access
from backend.jobs.attempt_states import AttemptState, SliceState, attempt_move, slice_move
from backend.jobs.attempts import newest_checkpoint
from backend.jobs.capacity import never_fits
from backend.jobs.memory import memory_fit
from backend.jobs.models import Attempt, AttemptSlice, Job, JobEvent
from backend.jobs.schemas import Implications, MemoryEstimateOut, Problem, ValidationOut
from backend.jobs.states import (
    STOPS_AT_ONCE,
    IllegalTransition,
    JobAction,
    JobState,
    cancelled_state,
    stop_target,
    transition,
)
from backend.signals import announce_jobs, request_stop, wake_scheduler
from workers.contract import entrypoints
from workers.contract.protocol import StopRequest
from workers.contract.spec import JobSpec, unsupported_reason


class SpecRefused(ValueError):
    """A valid spec this deployment cannot accept; carries the field it is about."""

    def __init__(self, loc: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc


class JobNotFound(LookupError):
    pass


def check_entrypoint(spec: JobSpec, roots: Sequence[Path]) -> None:
    """Refuse an entrypoint that does not resolve under the roots, as the worker resolves it."""
    if spec.entrypoint is None:
        return
    try:
        script_access.checked(spec.entrypoint, entrypoints.resolve(spec.entrypoint, roots))
    except entrypoints.EntrypointRefused as err:
        field = "script" if spec.entrypoint.script is not None else "module"
        raise SpecRefused(("entrypoint", field), str(err)) from None


def check_capacity(session: Session, spec: JobSpec) -> None:
    """Refuse a gang no registered node could ever hold, unless it may wait for capacity."""
    too_big = None if spec.wait_for_capacity else never_fits(session, spec)
    if too_big is not None:
        raise SpecRefused(("parallelism", "devices"), too_big)


def refusals(session: Session, *, spec: JobSpec, script_roots: Sequence[Path]) -> list[SpecRefused]:
    """Why this deployment refuses a valid spec, in the order a submission checks (the
    first is the 422 a submission answers; POST /api/jobs/validate lists them all)."""
    found = []
    try:
        check_entrypoint(spec, script_roots)
    except SpecRefused as err:
        found.append(err)
    reason = unsupported_reason(spec)
    if reason is not None:
        found.append(SpecRefused((), reason))
    try:
        check_capacity(session, spec)
    except SpecRefused as err:
        found.append(err)
    return found


def validate(
    session: Session, *, body: dict[str, Any], script_roots: Sequence[Path]
) -> ValidationOut:
    """What a submission of body would imply and every refusal it would get; stores nothing.

    A body the JobSpec schema refuses gets the submission's 422 details as its problems and
    the implications of the parts they depend on, when those are valid."""
    try:
        spec = JobSpec.model_validate(body)
    except ValidationError as err:
        refused = [
            Problem(loc=["body", *e["loc"]], msg=e["msg"], type=e["type"])
            for e in err.errors(include_url=False)
        ]
        return ValidationOut(
            valid=False, implications=_implied_by_parts(body), memory=None, problems=refused
        )
    problems = [
        Problem(loc=["body", *err.loc], msg=str(err), type="value_error")
        for err in refusals(session, spec=spec, script_roots=script_roots)
    ]
    memory = None if spec.template is None else memory_fit(session, spec=spec)
    return ValidationOut(
        valid=not problems,
        implications=Implications.model_validate(spec.implications()),
        memory=None if memory is None else MemoryEstimateOut.model_validate(memory),
        problems=problems,
    )


def _implied_by_parts(body: dict[str, Any]) -> Implications | None:
    """The implications of a refused body from what they depend on (parallelism, grad_accum,
    the template's batch_size), when those are valid; else None."""
    core: dict[str, Any] = {"name": "draft"}
    core |= {k: body[k] for k in ("parallelism", "grad_accum") if k in body}
    hyperparameters = body.get("hyperparameters")
    batch: dict[str, Any] = (
        {"batch_size": hyperparameters["batch_size"]}
        if isinstance(hyperparameters, dict) and "batch_size" in hyperparameters
        else {}
    )
    # any target will do for the last candidate: it has no batch size, so no global batch
    candidates: list[dict[str, Any]] = [{**core, "entrypoint": {"module": "draft"}}]
    if body.get("template") is not None:
        candidates.insert(0, {**core, "template": body["template"], "hyperparameters": batch})
    for candidate in candidates:
        try:
            implied = JobSpec.model_validate(candidate).implications()
        except ValidationError:
            continue
        return Implications.model_validate(implied)
    return None


def submit(
    session: Session,
    client: redis.Redis,
    *,
    principal: Principal,
    spec: JobSpec,
    script_roots: Sequence[Path],
    parent_id: int | None = None,
    sweep: tuple[int, int] | None = None,
    start_checkpoint: str | None = None,
) -> Job:
    """Validate what the engine can run, store the job as queued and wake the scheduler
    (`sweep`: the sweep id and trial number it is a trial of)."""
    for refused in refusals(session, spec=spec, script_roots=script_roots)[:1]:
        raise refused
    job = Job(
        name=spec.name,
        owner_id=principal.user_id,
        parent_id=parent_id,
        state=JobState.queued.value,
        spec=spec.model_dump(mode="json"),
        priority_rank=spec.priority.rank,
        devices_requested=spec.parallelism.devices,
        total_steps=spec.total_steps,
        sweep_id=sweep[0] if sweep else None,
        sweep_trial=sweep[1] if sweep else None,
        start_checkpoint=start_checkpoint,
    )
    session.add(job)
    session.flush()
    session.add(
        JobEvent(job_id=job.id, kind="submitted", message=f"submitted by {principal.username}")
    )
    return _committed(session, client, job)


def visible_jobs(
    session: Session,
    *,
    principal: Principal,
    state: str | None = None,
    limit: int = 200,
    archived: str = "hide",
) -> Sequence[Job]:
    """Jobs the caller may see, newest first (admins see every job); archived ones only
    when asked ("all" or "only")."""
    query = select(Job).order_by(Job.id.desc()).limit(limit)
    if archived != "all":
        query = query.where(Job.archived.is_(archived == "only"))
    if not principal.is_admin:
        query = query.where(Job.owner_id == principal.user_id)
    if state is not None:
        query = query.where(Job.state == state)
    return session.scalars(query).all()


def get_job(session: Session, *, principal: Principal, job_id: int) -> Job:
    """The job, if the caller may see it; otherwise JobNotFound (never a hint it exists)."""
    missing = JobNotFound(f"job {job_id} not found")
    return visible_or_raise(session, Job, job_id, principal=principal, missing=missing)


def attempts_of(session: Session, *, job: Job) -> Sequence[Attempt]:
    """Every attempt of a job, first to last."""
    query = select(Attempt).where(Attempt.job_id == job.id).order_by(Attempt.number)
    return session.scalars(query).all()


def events_of(session: Session, *, job: Job) -> Sequence[JobEvent]:
    """The job's timeline, oldest first (stacks at a hang are served apart: hang-stacks)."""
    query = (
        select(JobEvent)
        .where(JobEvent.job_id == job.id, JobEvent.kind != "hang_stack")
        .order_by(JobEvent.id)
    )
    return session.scalars(query).all()


def current_attempt(session: Session, job: Job) -> Attempt | None:
    if not job.attempt:
        return None
    return session.scalars(
        select(Attempt).where(Attempt.job_id == job.id, Attempt.number == job.attempt)
    ).first()


def stop(
    session: Session, client: redis.Redis, *, principal: Principal, job: Job, action: str
) -> Job:
    """Cancel or pause a job: at once if nothing runs yet, else ask its ranks to stop."""
    final = cancelled_state(job) if action == "cancel" else JobState.paused
    attempt = current_attempt(session, job)
    by = f"{action} requested by {principal.username}"
    state = JobState(job.state)
    target = stop_target(state, JobAction(action))  # the one rule the UI's buttons follow too
    if target is None:
        raise IllegalTransition(f"job {job.id} is {job.state}; it cannot be {action}led")
    if state in STOPS_AT_ONCE or (
        state is JobState.scheduled and attempt is not None and _withdraw(session, attempt)
    ):
        session.add(transition(job, final, message=by))
    elif attempt is not None:
        session.add(transition(job, target, message=by, attempt_id=attempt.id))
        job.stop_request = StopRequest(action)
        request_stop(client, attempt_id=attempt.id, action=job.stop_request)
    else:
        raise IllegalTransition(f"job {job.id} is {job.state}; it cannot be {action}led")
    return _committed(session, client, job)


def _withdraw(session: Session, attempt: Attempt) -> bool:
    """Take back an attempt no worker has claimed yet (compare-and-set); True if it worked."""
    was, now = attempt_move(AttemptState.scheduled, AttemptState.withdrawn)
    result = session.execute(
        update(Attempt)
        .where(Attempt.id == attempt.id, Attempt.state == was)
        .values(state=now, exit_reason="stopped before it started")
    )
    if not result.rowcount:  # type: ignore[attr-defined]
        return False
    frm, to = slice_move(SliceState.scheduled, SliceState.withdrawn)
    session.execute(
        update(AttemptSlice)
        .where(AttemptSlice.attempt_id == attempt.id, AttemptSlice.state == frm)
        .values(state=to)
    )
    return True


class NothingToResume(ValueError):
    """A job that has no checkpoint to continue from (clone it instead)."""


def resume(
    session: Session,
    client: redis.Redis,
    *,
    principal: Principal,
    job: Job,
    devices: int | None = None,
) -> Job:
    """Queue a paused, cancelled or failed job again; it continues from its newest checkpoint."""
    state = JobState(job.state)
    if state not in (JobState.paused, JobState.cancelled, JobState.failed, JobState.stopped):
        raise IllegalTransition(
            f"job {job.id} is {job.state}; only paused, cancelled, stopped or failed jobs resume"
        )
    if state is not JobState.paused and newest_checkpoint(session, job.id) is None:
        raise NothingToResume(f"job {job.id} has no checkpoint to resume from; clone it instead")
    if devices is not None and devices != job.devices_requested:
        spec = respec(job.spec, {"parallelism": {"devices": devices}})
        check_capacity(session, spec)
        job.spec = spec.model_dump(mode="json")
        job.devices_requested = devices
    how = f" on {job.devices_requested} devices" if devices is not None else ""
    job.early_stop = None  # resumed by a person: a later cancel is theirs
    session.add(transition(job, JobState.queued, message=f"resumed by {principal.username}{how}"))
    return _committed(session, client, job)


def clone(
    session: Session,
    client: redis.Redis,
    *,
    principal: Principal,
    parent: Job,
    changes: dict[str, Any],
    script_roots: Sequence[Path],
    start: tuple[int, str] | None = None,
) -> Job:
    """A new job from the parent's spec with changes merged over it, linked to the parent
    (`start`: the step and path of the parent's checkpoint it starts from)."""
    suffix = f"from step {start[0]}" if start else "clone"
    changes = {"name": f"{parent.name} ({suffix})", **changes}
    spec = respec(parent.spec, changes)
    return submit(
        session,
        client,
        principal=principal,
        spec=spec,
        script_roots=script_roots,
        parent_id=parent.id,
        start_checkpoint=start[1] if start else None,
    )


def merge_spec(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge changes over base: nested mappings merge, anything else replaces."""
    merged = dict(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_spec(merged[key], value)
        else:
            merged[key] = value
    return merged


def respec(base: dict[str, Any], changes: dict[str, Any]) -> JobSpec:
    """Validate the merged spec; a refusal names the field (pydantic ValidationError)."""
    spec = JobSpec.model_validate(merge_spec(base, changes))
    reason = unsupported_reason(spec)
    if reason is not None:
        raise SpecRefused((), reason)
    return spec


def _committed(session: Session, client: redis.Redis, job: Job) -> Job:
    """Commit the change to job, announce it live and wake the scheduler for it."""
    session.commit()
    announce_jobs(client, [job.id])
    wake_scheduler(client)
    return job
