"""What the policy needs, read from the database in a few queries.

The nodes' free devices, running jobs (possible victims, or stopping ones whose devices
are about to be free), each queued job's owner's fair-share factor, and the quotas of
owners that have one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.orm import Session

from backend.db import as_utc, utcnow
from backend.jobs.attempt_states import LIVE_SLICE_VALUES, AttemptState
from backend.jobs.models import Attempt, AttemptSlice, Job
from backend.jobs.states import JobState
from backend.placement.fairshare import fair_share_factors
from backend.placement.policy import QueuedJob, Quota
from backend.placement.preemption import RunningJob
from backend.usage.accounting import WEEK, decayed_usage, device_hours_since
from backend.usage.models import UserLimits
from workers.contract.spec import Parallelism

#: the nodes a job's gang spans, read from its stored spec in SQL (the contract's default
#: where an older spec has none). A stored spec is the validated JobSpec's dump (submit,
#: respec); of a queued job's the pass needs nothing else, and validating each one into a
#: JobSpec every pass cost ~37% of a pass over 100k queued jobs (#34).
NODES_REQUESTED = func.coalesce(
    Job.spec[("parallelism", "nodes")].as_integer(), Parallelism.model_fields["nodes"].default
)


class Waiting(NamedTuple):
    """What a pass reads of a queued job: plain columns, no ORM object (10,000 Job objects
    were a sixth of a first pass's CPU, and most of a steady pass over a long queue)."""

    id: int
    owner_id: int
    devices_requested: int
    priority_rank: int
    queue_position: int | None
    wait_reason: str | None
    preempted_by: int | None
    reason: str | None
    #: the nodes its gang spans
    nodes: int


def queued_jobs(session: Session) -> list[Waiting]:
    """Every queued job, with the nodes its gang spans."""
    rows = session.execute(
        select(
            Job.id,
            Job.owner_id,
            Job.devices_requested,
            Job.priority_rank,
            Job.queue_position,
            Job.wait_reason,
            Job.preempted_by,
            Job.reason,
            NODES_REQUESTED,
        ).where(Job.state == JobState.queued.value)
    )
    return [Waiting(*row) for row in rows]


def placed_jobs(session: Session, job_ids: Iterable[int]) -> dict[int, Job]:
    """The jobs of these ids that are still queued, with their specs, in one query.

    A job cancelled since the pass read the queue is left out (not placed).
    """
    ids = list(job_ids)
    if not ids:
        return {}
    jobs = session.scalars(
        select(Job).where(Job.id.in_(ids), Job.state == JobState.queued.value)
    ).all()
    return {job.id: job for job in jobs}


@dataclass(frozen=True)
class SharingSettings:
    """Preemption and fair-share knobs (from `backend.config.Settings`)."""

    #: a job preempted less than this long ago is not a victim again (no preemption storm)
    min_run_seconds: float = 300.0
    #: recent usage halves in weight every half-life (Slurm's PriorityDecayHalfLife)
    half_life_hours: float = 168.0


def running_jobs(session: Session, *, settings: SharingSettings) -> list[RunningJob]:
    """Every job holding devices, as the policy sees it: victim candidate or stopping."""
    rows = session.execute(
        select(
            Job,
            Attempt.state,
            Attempt.claimed_at,
            AttemptSlice.node_name,
            AttemptSlice.devices,
        )
        .join(Attempt, (Attempt.job_id == Job.id) & (Attempt.number == Job.attempt))
        .join(AttemptSlice, AttemptSlice.attempt_id == Attempt.id)
        .where(AttemptSlice.state.in_(LIVE_SLICE_VALUES))
    ).all()
    recent = utcnow() - timedelta(seconds=settings.min_run_seconds)
    slices: dict[int, list[tuple[str, int]]] = {}
    facts: dict[int, tuple[int, int, bool, bool, float]] = {}
    for job, attempt_state, claimed, node, devs in rows:
        slices.setdefault(job.id, []).append((node, len(devs)))
        stopping = job.stop_request is not None
        preemptible = (
            job.state == JobState.running
            and attempt_state == AttemptState.running
            and not stopping
            and (job.preempted_at is None or as_utc(job.preempted_at) < recent)
            and job.spec_model.preemptible
        )
        started = as_utc(claimed).timestamp() if claimed is not None else 0.0
        facts[job.id] = (job.owner_id, job.priority_rank, preemptible, stopping, started)
    return [
        RunningJob(
            id=job_id,
            priority=rank,
            slices=tuple(slices[job_id]),
            started=started,
            preemptible=preemptible,
            stopping=stopping,
            owner=owner,
        )
        for job_id, (owner, rank, preemptible, stopping, started) in facts.items()
    ]


class UsageCache:
    """Decayed usage per owner, read again at most every `ttl` seconds: it changes slowly
    (a half-life of days), and reading it scans the attempts of the last 20 half-lives."""

    def __init__(self, ttl: float = 10.0) -> None:
        self.ttl = ttl
        self._read_at = -math.inf
        self._usage: dict[int, float] = {}

    def usage(self, session: Session, settings: SharingSettings) -> dict[int, float]:
        if time.monotonic() - self._read_at >= self.ttl:
            half_life = timedelta(hours=settings.half_life_hours)
            self._usage = decayed_usage(session, half_life=half_life)
            self._read_at = time.monotonic()
        return dict(self._usage)


def fair_shares(
    session: Session,
    owners: Iterable[int],
    *,
    settings: SharingSettings,
    cache: UsageCache | None = None,
) -> dict[int, float]:
    """Each owner's fair-share factor (1 when nobody has used anything)."""
    usage = (cache or UsageCache(ttl=0)).usage(session, settings)
    shares = {u: s for u, s in session.execute(select(UserLimits.user_id, UserLimits.share))}
    for owner in owners:
        usage.setdefault(owner, 0.0)
    return fair_share_factors(usage=usage, shares={u: shares.get(u, 1.0) for u in usage})


def quotas(session: Session, running: list[RunningJob], *, now: datetime) -> dict[int, Quota]:
    """Quotas of the owners that have one, with the devices they hold and hours they used."""
    limits = session.scalars(
        select(UserLimits).where(
            (UserLimits.max_devices.is_not(None)) | (UserLimits.max_device_hours.is_not(None))
        )
    ).all()
    if not limits:
        return {}
    in_use: dict[int, int] = {}
    for job in running:
        in_use[job.owner] = in_use.get(job.owner, 0) + sum(count for _, count in job.slices)
    hours = device_hours_since(session, [lim.user_id for lim in limits], since=now - WEEK, now=now)
    return {
        lim.user_id: Quota(
            max_devices=lim.max_devices,
            devices_in_use=in_use.get(lim.user_id, 0),
            max_device_hours=lim.max_device_hours,
            device_hours=hours.get(lim.user_id, 0.0),
        )
        for lim in limits
    }


#: a waiting job's place in the queue and why it waits, written for many jobs at once
QUEUE_PLACE = (
    update(Job)
    .where(Job.id == bindparam("job"))
    .values(
        queue_position=bindparam("position"),
        wait_reason=bindparam("wait"),
        updated_at=bindparam("now"),
    )
)


def number_queue(
    session: Session,
    jobs: Mapping[int, Waiting],
    ordered: Sequence[QueuedJob],
    why: Mapping[int, str],
) -> set[int]:
    """Write each waiting job's place in the queue (1 = next) and why it waits (`why`); the
    ids whose place or reason changed.

    One executemany through Core: the ORM's flush of a first pass over 10,000 queued jobs
    (an UPDATE each) was a fifth of its CPU (docs/benchmarks.md, "Scheduler throughput").
    """
    changed: dict[int, tuple[int, str | None]] = {}
    for position, queued in enumerate(ordered, start=1):
        job = jobs[queued.id]
        reason = why.get(job.id, job.wait_reason)
        if job.queue_position != position or job.wait_reason != reason:
            changed[job.id] = (position, reason)
    if changed:
        now = utcnow()
        session.connection().execute(
            QUEUE_PLACE,
            [{"job": i, "position": p, "wait": r, "now": now} for i, (p, r) in changed.items()],
        )
    return set(changed)


def explain_preempted(jobs: Mapping[int, Waiting], waiting: dict[int, str]) -> None:
    """A preempted job waiting to resume says so before the policy's reason."""
    for job_id, reason in waiting.items():
        job = jobs[job_id]
        if job.preempted_by is not None and job.reason == f"preempted by job {job.preempted_by}":
            waiting[job_id] = f"{job.reason}; {reason}"[:256]
