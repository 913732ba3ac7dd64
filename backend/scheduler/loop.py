"""The scheduler loop: derive what must run from the database, place it, dispatch it."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

import redis
from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from backend.background import keep_running
from backend.db import Database, utcnow
from backend.deployment_keys import keys_of
from backend.executors.base import Executor
from backend.jobs.attempt_end import release_restarts
from backend.jobs.attempt_states import (
    AttemptState,
    SliceState,
)
from backend.jobs.attempts import newest_checkpoints
from backend.jobs.models import Attempt, AttemptSlice, Job, JobEvent
from backend.jobs.preempt import apply_preemptions
from backend.jobs.states import STOPPED, JobState, transition
from backend.placement.policy import Placement, QueuedJob, queue_order
from backend.scheduler.inputs import (
    SharingSettings,
    UsageCache,
    explain_preempted,
    fair_shares,
    number_queue,
    placed_jobs,
    queued_jobs,
    quotas,
    running_jobs,
)
from backend.scheduler.leader import LeaderLock
from backend.signals import (
    SCHEDULER_WAKE_KEY,
    announce_jobs,
    request_stop,
)
from backend.usage.accounting import next_settle, settle
from workers.contract.oom import reduced_spec
from workers.contract.protocol import AttemptOrder, StopRequest
from workers.contract.spec import JobSpec

log = logging.getLogger(__name__)

#: the longest a scheduler with nothing to do (nothing queued or in flight) waits for a
#: wake-up before its next pass; everything that can give it work wakes it at once
#: (backend.signals.wake_scheduler: a submission, an attempt's end, a node's registration or
#: change), so this only bounds how late it sees time-based news (a silent node's lease)
IDLE_SECONDS = 2.0
#: the longest an idle leader goes without a full pass when nothing woke it and nothing is
#: due (`Scheduler._quiet`): a bound on what a wake-up lost to Redis would cost
QUIET_MAX = timedelta(seconds=30)
#: what a pass writes of each "scheduled" event (the rest are the columns' defaults)
EVENT_COLUMNS = ("job_id", "attempt_id", "kind", "message", "time")
#: attempts dated per statement at a pass's commit (SQLite binds at most 32,766 values)
CLAIM_CLOCK_CHUNK = 5_000
#: job states in which a job can still give the scheduler work
IN_FLIGHT = tuple(sorted(s.value for s in JobState if s not in STOPPED))


class Scheduler:
    """Runs scheduling passes while it holds the leader lock; `executor` runs what it places."""

    def __init__(
        self,
        *,
        db: Database,
        client: redis.Redis,
        executor: Executor,
        interval: float,
        sharing: SharingSettings | None = None,
        idle_interval: float = IDLE_SECONDS,
    ) -> None:
        self.db = db
        self.executor = executor
        self.sharing = sharing or SharingSettings()
        self._usage = UsageCache()  # fair share's decayed usage, re-read every 10 s
        self._preempting: list[int] = []  # attempts to ask to stop once this pass commits
        self._placed: list[Attempt] = []  # attempts this pass writes (their claim clocks)
        self.client = client
        self.interval = interval
        ttl = max(5.0, interval * 10)
        #: passes this far apart while idle; within the leader lock's TTL, renewed each pass
        self.idle_interval = max(interval, min(idle_interval, ttl / 2))
        self._idle = False  # the last pass found nothing queued, in flight or changed
        #: after an idle pass: the first moment a pass may find work no wake-up announces
        #: (a node's lease runs out, an ended attempt is due to settle), on the monotonic
        #: clock, so that a step of the wall clock cannot stretch a skip past QUIET_MAX
        self._quiet_until: float | None = None
        self._leading = False  # this process led at its last pass or skipped pass
        self._woken = False  # the last wait ended with a wake-up (or with a Redis error)
        self.leader = LeaderLock(client, ttl=ttl)
        self.keys = keys_of(client)
        self._stop = threading.Event()  # run()'s: what a standby waits on between tries

    def run(self, stop: threading.Event) -> None:
        """Loop until stop is set: a pass per tick or per wake-up, while leader."""
        self._stop = stop
        keep_running("scheduler", self._pass_or_wait, stop, log=log, pause=self.interval)
        self.leader.release()

    def _pass_or_wait(self) -> None:
        leader = self.leader.hold()
        if leader and self._quiet():
            self.executor.still_listening()  # the leader lock renewed, no database work
        elif leader:
            self.tick()
        self._leading = leader
        if not leader:
            # a wake-up is the leader's to take: one a standby popped would leave an idle
            # leader skipping its passes until its next due moment (up to QUIET_MAX)
            self._stop.wait(self.interval)
            return
        self._woken = True  # a wake-up a Redis error below may have lost counts as one
        woke = self.client.blpop([self.keys.name(SCHEDULER_WAKE_KEY)], timeout=self._wait())
        self._woken = woke is not None

    def _quiet(self) -> bool:
        """Whether this pass can be skipped: the last one (ours, as leader) found nothing to
        do, nothing woke the loop since, and nothing can have come due without a wake-up."""
        return (
            self._idle
            and self._leading
            and not self._woken
            and self._quiet_until is not None
            and time.monotonic() < self._quiet_until
        )

    def _wait(self) -> float:
        """How long the leader waits for a wake-up now: `wait_seconds` (renewing the lock
        within its TTL), no later than the moment a skipped pass would come due."""
        wait = self.wait_seconds
        if self._idle and self._quiet_until is not None:
            wait = min(wait, self._quiet_until - time.monotonic())
        return max(wait, 0.001)  # BLPOP's timeout 0 would wait for ever

    @property
    def wait_seconds(self) -> float:
        """How long the leader waits for a wake-up after its last pass: `idle_interval` when
        that pass found nothing queued, in flight or changed, else `interval`."""
        return self.idle_interval if self._idle else self.interval

    def tick(self) -> list[Placement]:
        """One pass: what the executor saw end, restarts due, stop requests, new placements."""
        self._idle = False  # until this pass has committed
        with self.db.session() as session:
            changed = self.executor.observe(session) | release_restarts(session)
            self._reassert_stops(session)
            settle(session)  # ended attempts' device-seconds (backend.usage)
            self._preempting, self._placed = [], []
            placements, orders, waiting = self._place(session)
            idle = not (changed or placements or waiting) and not self._in_flight(session)
            quiet_until = self._due(session) if idle else None
            self._start_claim_clocks(session)
            session.commit()
        self._idle, self._quiet_until = idle, quiet_until
        # after the commit: a victim's end report must find why it stopped
        self.executor.stop(self._preempting, StopRequest.preempt)
        self.executor.start(orders)
        announce_jobs(self.client, changed | waiting | {p.job_id for p in placements})
        return placements

    def _start_claim_clocks(self, session: Session) -> None:
        """Date this pass's attempts at its commit, when nodes can first see them: a slice is
        withdrawn `claim_timeout` after that (`NodePool`), and a pass over a long queue can
        run longer than that after writing them (#34: 147 s against 60 s; dated at the
        write, every pass withdrew the placements of the one before)."""
        if not self._placed:
            return
        session.flush()  # every other write of the pass first, so that only the commit is left
        now = utcnow()
        ids = [attempt.id for attempt in self._placed]
        # one statement (the ORM's flush wrote an UPDATE per attempt); the loaded attempts
        # are told the value as committed, so nothing is left to flush
        for start in range(0, len(ids), CLAIM_CLOCK_CHUNK):
            chunk = ids[start : start + CLAIM_CLOCK_CHUNK]
            session.connection().execute(
                update(Attempt).where(Attempt.id.in_(chunk)).values(created_at=now)
            )
        for attempt in self._placed:
            set_committed_value(attempt, "created_at", now)

    def _due(self, session: Session) -> float:
        """After an idle pass: when (`time.monotonic()`) the next pass must run even if
        nothing wakes the loop."""
        now = utcnow()
        due = [now + QUIET_MAX, self.executor.quiet_until(session), next_settle(session)]
        first = min(moment for moment in due if moment is not None)
        return time.monotonic() + (first - now).total_seconds()

    @staticmethod
    def _in_flight(session: Session) -> bool:
        """Whether any job is queued, placed, running or stopping (or waits to restart)."""
        found = session.scalars(select(Job.id).where(Job.state.in_(IN_FLIGHT)).limit(1)).first()
        return found is not None

    def _reassert_stops(self, session: Session) -> None:
        """Redis may have lost a stop request; the database still knows it."""
        rows = session.execute(
            select(Attempt.id, Job.stop_request)
            .join(Job, (Job.id == Attempt.job_id) & (Job.attempt == Attempt.number))
            .where(Job.stop_request.is_not(None), Attempt.state == AttemptState.running)
        ).all()
        for attempt_id, action in rows:
            if action is not None:  # the query's filter: for the type checker
                request_stop(self.client, attempt_id=attempt_id, action=action)

    def _place(self, session: Session) -> tuple[list[Placement], list[AttemptOrder], set[int]]:
        queued = queued_jobs(session)
        if not queued:
            return [], [], set()
        jobs = {job.id: job for job in queued}
        owners = {j.owner_id for j in jobs.values()}
        fair = fair_shares(session, owners, settings=self.sharing, cache=self._usage)
        queue = [
            QueuedJob(
                id=job.id,
                devices=job.devices_requested,
                nodes=job.nodes,
                priority=job.priority_rank,
                order=job.id,
                owner=job.owner_id,
                fair_share=fair.get(job.owner_id, 1.0),
            )
            for job in queued
        ]
        running = running_jobs(session, settings=self.sharing)
        limits = quotas(session, running, now=utcnow())
        result = self.executor.place(session, queue, running=running, quotas=limits)
        explain_preempted(jobs, result.waiting)
        pairs = [(p.victim, p.by) for p in result.preemptions]
        self._preempting, preempted = apply_preemptions(session, pairs)
        still = [q for q in queue_order(queue) if q.id in result.waiting]  # not placed now
        waiting_changed = number_queue(session, jobs, still, result.waiting) | preempted
        placed = placed_jobs(session, [p.job_id for p in result.placements])
        placements = [p for p in result.placements if p.job_id in placed]  # none cancelled since
        orders = self._dispatch(session, placed, placements)
        return placements, orders, waiting_changed

    def _dispatch(
        self, session: Session, jobs: dict[int, Job], placements: list[Placement]
    ) -> list[AttemptOrder]:
        """Write every placement's attempt and slices (committed before any task is sent)."""
        if not placements:
            return []
        resume = newest_checkpoints(session, [p.job_id for p in placements])
        attempts = [
            Attempt(
                job_id=p.job_id,
                number=jobs[p.job_id].attempt + 1,
                node_name=p.slices[0][0],
                devices=list(p.slices[0][1]),
                state=AttemptState.scheduled,
                master_port=0,  # chosen by the node of rank 0 when it claims
                # its own newest checkpoint, else the one it was cloned from (if any)
                resume_from=resume.get(p.job_id) or jobs[p.job_id].start_checkpoint,
                owner_id=jobs[p.job_id].owner_id,  # accounting (backend.usage)
                device_count=sum(len(devices) for _, devices in p.slices),
            )
            for p in placements
        ]
        session.add_all(attempts)
        session.flush()  # one round trip assigns every attempt id
        self._placed = attempts
        orders = []
        # the events and slices go in as rows through Core (one executemany each), not as ORM
        # objects the flush inserts one by one (docs/benchmarks.md, "Scheduler throughput")
        events: list[dict[str, Any]] = []
        slices: list[dict[str, Any]] = []
        addresses: dict[str, str] = {}  # rank 0's node's, asked once per node and pass
        for placement, attempt in zip(placements, attempts, strict=True):
            job = jobs[placement.job_id]
            job.attempt, job.wait_reason = attempt.number, None
            where = "; ".join(f"{name} devices {list(devs)}" for name, devs in placement.slices)
            event = transition(
                job,
                JobState.scheduled,
                message=f"attempt {attempt.number} scheduled on {where}",
                attempt_id=attempt.id,
            )
            events.append({column: getattr(event, column) for column in EVENT_COLUMNS})
            halvings = job.oom_reductions  # an out-of-memory restart runs a smaller shape
            spec = (
                JobSpec.model_validate(reduced_spec(job.spec, halvings))
                if halvings
                else job.spec_model
            )
            for rank, (name, devices) in enumerate(placement.slices):
                slices.append(
                    {
                        "attempt_id": attempt.id,
                        "node_name": name,
                        "node_rank": rank,
                        "devices": list(devices),
                        "state": SliceState.scheduled.value,
                    }
                )
                orders.append(
                    AttemptOrder(
                        attempt_id=attempt.id,
                        job_id=job.id,
                        number=attempt.number,
                        node=name,
                        devices=list(devices),
                        node_rank=rank,
                        nnodes=len(placement.slices),
                        master_addr=self._address(session, placement.slices[0][0], addresses),
                        spec=spec,
                        resume_from=attempt.resume_from,
                        deployment=self.keys.deployment,
                    )
                )
        connection = session.connection()
        connection.execute(insert(JobEvent), events)
        connection.execute(insert(AttemptSlice), slices)
        return orders

    def _address(self, session: Session, node: str, known: dict[str, str]) -> str:
        """The executor's address of `node`, read once per pass and without a flush (a
        flush per placement was 2.9 of a 10k pass's 13 s)."""
        if node not in known:
            with session.no_autoflush:
                known[node] = self.executor.address_of(session, node)
        return known[node]
