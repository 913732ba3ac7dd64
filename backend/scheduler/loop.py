"""The scheduler loop: derive what must run from the database, place it, dispatch it."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from typing import Any

import redis
from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.db import Database, as_utc, utcnow
from backend.jobs.attempts import newest_checkpoint, restart_or_fail
from backend.jobs.models import Attempt, Job
from backend.jobs.states import ACTIVE, JobState, transition
from backend.nodes.models import Node
from backend.scheduler.leader import LeaderLock
from backend.scheduler.policy import NodeCapacity, Placement, QueuedJob, plan
from backend.signals import SCHEDULER_WAKE_KEY, announce_jobs, announce_nodes, request_stop
from workers.protocol import RUN_ATTEMPT_TASK, AttemptOrder, node_queue
from workers.spec import JobSpec

log = logging.getLogger(__name__)

#: an attempt no worker claimed within this time is withdrawn and its job requeued
CLAIM_TIMEOUT = timedelta(seconds=60)
MASTER_PORT_BASE = 29500


class Scheduler:
    """Runs scheduling passes while it holds the leader lock."""

    def __init__(
        self,
        *,
        db: Database,
        client: redis.Redis,
        celery: Any,
        interval: float,
        heartbeat_timeout: float,
    ) -> None:
        self.db = db
        self.client = client
        self.celery = celery
        self.interval = interval
        self.heartbeat_timeout = timedelta(seconds=heartbeat_timeout)
        self.leader = LeaderLock(client, ttl=max(5.0, interval * 10))
        self.waiting: dict[int, str] = {}

    def run(self, stop: threading.Event) -> None:
        """Loop until stop is set: a pass per tick or per wake-up, while leader."""
        while not stop.is_set():
            try:
                if self.leader.hold():
                    self.tick()
                self.client.blpop([SCHEDULER_WAKE_KEY], timeout=self.interval)
            except redis.RedisError as err:
                log.warning("scheduler: redis unavailable (%s); retrying", err)
                stop.wait(self.interval)
            except Exception:
                log.exception("scheduler pass failed")
                stop.wait(self.interval)
        self.leader.release()

    def tick(self) -> list[Placement]:
        """One pass: lost nodes, unclaimed attempts, stop requests, then new placements."""
        with self.db.session() as session:
            changed = self._expire_nodes(session) | self._withdraw_unclaimed(session)
            self._reassert_stops(session)
            placements, orders = self._place(session, changed)
            session.commit()
        for order in orders:
            self.celery.send_task(
                RUN_ATTEMPT_TASK, args=[order.model_dump(mode="json")], queue=node_queue(order.node)
            )
        announce_jobs(self.client, changed | {p.job_id for p in placements})
        return placements

    def _expire_nodes(self, session: Session) -> set[int]:
        deadline = utcnow() - self.heartbeat_timeout
        changed: set[int] = set()
        for node in session.scalars(select(Node).where(Node.state == "up")):
            if as_utc(node.last_heartbeat) >= deadline:
                continue
            node.state = "lost"
            announce_nodes(self.client)
            for attempt in session.scalars(
                select(Attempt).where(
                    Attempt.node_name == node.name, Attempt.state.in_(("scheduled", "running"))
                )
            ):
                attempt.state = "lost"
                attempt.finished_at = utcnow()
                attempt.exit_reason = f"node {node.name} stopped heartbeating"
                job = session.get_one(Job, attempt.job_id)
                if job.attempt == attempt.number and JobState(job.state) in ACTIVE:
                    changed.add(job.id)
                    self._end_interrupted(session, job, attempt, attempt.exit_reason)
        return changed

    def _withdraw_unclaimed(self, session: Session) -> set[int]:
        deadline = utcnow() - CLAIM_TIMEOUT
        changed: set[int] = set()
        for attempt in session.scalars(select(Attempt).where(Attempt.state == "scheduled")):
            if as_utc(attempt.created_at) >= deadline:
                continue
            attempt.state = "withdrawn"
            attempt.exit_reason = "no worker claimed it in time"
            job = session.get_one(Job, attempt.job_id)
            if job.attempt == attempt.number and job.state == JobState.scheduled.value:
                session.add(transition(job, JobState.queued, message=attempt.exit_reason))
                changed.add(job.id)
        return changed

    def _end_interrupted(self, session: Session, job: Job, attempt: Attempt, reason: str) -> None:
        if job.stop_request == "cancel":
            session.add(transition(job, JobState.cancelled, message=reason, attempt_id=attempt.id))
        elif job.stop_request == "pause":
            session.add(transition(job, JobState.paused, message=reason, attempt_id=attempt.id))
        else:
            restart_or_fail(session, job, reason=reason, attempt_id=attempt.id)

    def _reassert_stops(self, session: Session) -> None:
        """Redis may have lost a stop request; the database still knows it."""
        rows = session.execute(
            select(Attempt.id, Job.stop_request)
            .join(Job, (Job.id == Attempt.job_id) & (Job.attempt == Attempt.number))
            .where(Job.stop_request.is_not(None), Attempt.state == "running")
        ).all()
        for attempt_id, action in rows:
            request_stop(self.client, attempt_id=attempt_id, action=str(action))

    def _place(
        self, session: Session, changed: set[int]
    ) -> tuple[list[Placement], list[AttemptOrder]]:
        queued = session.scalars(select(Job).where(Job.state == JobState.queued.value)).all()
        if not queued:
            self.waiting = {}
            return [], []
        jobs = {job.id: job for job in queued}
        queue = [
            QueuedJob(
                id=job.id,
                devices=job.devices_requested,
                nodes=int(job.spec["parallelism"].get("nodes", 1)),
                priority=job.priority_rank,
                order=job.id,
            )
            for job in queued
        ]
        result = plan(queue, self._capacities(session))
        self.waiting = result.waiting
        orders = [self._dispatch(session, jobs[p.job_id], p) for p in result.placements]
        return result.placements, orders

    def _capacities(self, session: Session) -> list[NodeCapacity]:
        busy: dict[str, set[int]] = {}
        for attempt in session.scalars(
            select(Attempt).where(Attempt.state.in_(("scheduled", "running")))
        ):
            busy.setdefault(attempt.node_name, set()).update(int(i) for i in attempt.devices)
        nodes = session.scalars(select(Node).where(Node.state == "up", Node.drained.is_(False)))
        return [
            NodeCapacity(
                name=node.name,
                total=len(node.devices),
                free=tuple(
                    d.index for d in node.devices if d.index not in busy.get(node.name, set())
                ),
            )
            for node in nodes
        ]

    def _dispatch(self, session: Session, job: Job, placement: Placement) -> AttemptOrder:
        node_name, devices = placement.slices[0]
        node = session.scalars(select(Node).where(Node.name == node_name)).one()
        number = job.attempt + 1
        attempt = Attempt(
            job_id=job.id,
            number=number,
            node_name=node_name,
            devices=list(devices),
            state="scheduled",
            master_port=0,
            resume_from=newest_checkpoint(session, job.id),
        )
        session.add(attempt)
        session.flush()
        attempt.master_port = MASTER_PORT_BASE + attempt.id % 10_000
        job.attempt = number
        session.add(
            transition(
                job,
                JobState.scheduled,
                message=f"attempt {number} scheduled on {node_name} devices {list(devices)}",
                attempt_id=attempt.id,
            )
        )
        return AttemptOrder(
            attempt_id=attempt.id,
            job_id=job.id,
            number=number,
            node=node_name,
            devices=list(devices),
            master_addr=node.address,
            master_port=attempt.master_port,
            spec=JobSpec.model_validate(job.spec),
            resume_from=attempt.resume_from,
        )
