"""Property: whatever happens, in any order, devices are booked exactly by live work.

Random sequences of submissions (single- and two-node gangs), scheduling passes, claims,
finishes, cancels, pauses, node losses, claim timeouts, worker restarts (new
incarnations) and heartbeats on a two-node cluster, against the real service functions,
SQLite and Redis. After every step: every booked device belongs to a live slice of a live
attempt, no device is booked twice, every live attempt still holds its gang, and no job
has two live attempts.
"""

from __future__ import annotations

import tempfile
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from sqlalchemy import select, update

from backend.auth.models import User
from backend.auth.service import Principal
from backend.db import Database, utcnow
from backend.executors.nodes import NodePool, busy_devices
from backend.jobs import attempts, fencing, service
from backend.jobs.attempt_states import LIVE_ATTEMPT_VALUES, LIVE_SLICE_VALUES
from backend.jobs.models import Attempt, AttemptSlice, Job
from backend.migrate import upgrade
from backend.nodes.models import Node
from backend.scheduler.loop import Scheduler
from tests.conftest import REDIS_BASE, TEST_REDIS_DB
from workers.contract.protocol import AttemptOutcome, Heartbeat, NodeDevice, NodeRegistration
from workers.contract.spec import JobSpec
from workers.node.celery_app import make_celery

NODES = ("n1", "n2")
DEVICES = 4


def spec(devices: int, nodes_: int) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "p",
            "template": "mlp",
            "parallelism": {"strategy": "data", "devices": devices, "nodes": nodes_},
            "max_restarts": 1,
        }
    )


class Cluster(RuleBasedStateMachine):
    """A control plane with two nodes of four devices, driven step by random step."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        url = f"sqlite:///{Path(self.tmp.name) / 'tb.db'}"
        upgrade(url)
        self.db = Database(url)
        self.redis = redis.Redis.from_url(f"{REDIS_BASE}/{TEST_REDIS_DB}")
        self.redis.flushdb()
        self.pool = NodePool(
            client=self.redis,
            celery=make_celery(f"{REDIS_BASE}/{TEST_REDIS_DB}"),
            heartbeat_timeout=30,
            claim_timeout=60,
        )
        self.scheduler = Scheduler(db=self.db, client=self.redis, interval=0.1, executor=self.pool)
        self.instances = {name: uuid.uuid4().hex for name in NODES}
        with self.db.session() as session:
            user = User(username="alice", role="user")
            session.add(user)
            session.flush()
            scopes = frozenset({"read", "submit"})
            self.alice = Principal(user.id, "alice", "user", scopes, 0, "api")
            session.commit()
        for name in NODES:
            self._register(name)

    def teardown(self) -> None:
        self.db.dispose()
        self.redis.flushdb()
        self.redis.close()
        self.tmp.cleanup()

    def _register(self, name: str) -> None:
        registration = NodeRegistration(
            name=name,
            instance=self.instances[name],
            hostname="h",
            address="127.0.0.1",
            devices=[NodeDevice(index=i, kind="cpu", name=f"slot {i}") for i in range(DEVICES)],
            data_dir="/",
            # one shared run root (each sees the others' markers), so 2-node gangs are placed
            storage_seen={n: i for n, i in self.instances.items() if n != name},
        )
        with self.db.session() as session:
            fencing.register(session, self.redis, registration=registration)

    def _slices(self, *states: str) -> list[tuple[int, str]]:
        with self.db.session() as session:
            rows = session.execute(
                select(AttemptSlice.attempt_id, AttemptSlice.node_name).where(
                    AttemptSlice.state.in_(states)
                )
            ).all()
        return sorted((a, n) for a, n in rows)

    @rule(shape=st.sampled_from([(1, 1), (2, 1), (4, 1), (2, 2), (4, 2), (8, 2)]))
    def submit(self, shape: tuple[int, int]) -> None:
        with self.db.session() as session:
            service.submit(
                session, self.redis, principal=self.alice, spec=spec(*shape), script_roots=[]
            )

    @rule()
    def schedule(self) -> None:
        self.scheduler.tick()

    @rule(pick=st.integers(0, 50))
    def claim(self, pick: int) -> None:
        scheduled = self._slices("scheduled")
        if scheduled:
            attempt_id, node = scheduled[pick % len(scheduled)]
            with self.db.session() as session:
                attempts.claim(
                    session, attempt_id=attempt_id, node=node, instance=self.instances[node]
                )

    @rule(pick=st.integers(0, 50), outcome=st.sampled_from(["succeeded", "failed", "stopped"]))
    def finish(self, pick: int, outcome: str) -> None:
        running = self._slices("running")
        if running:
            attempt_id, node = running[pick % len(running)]
            report = AttemptOutcome(outcome=outcome, instance=self.instances[node])  # type: ignore[arg-type]
            with self.db.session() as session:
                attempts.finish(
                    session, self.redis, attempt_id=attempt_id, node=node, outcome=report
                )

    @rule(pick=st.integers(0, 50), action=st.sampled_from(["cancel", "pause"]))
    def stop(self, pick: int, action: str) -> None:
        with self.db.session() as session:
            jobs = session.scalars(select(Job).order_by(Job.id)).all()
            if not jobs:
                return
            job = jobs[pick % len(jobs)]
            try:
                service.stop(session, self.redis, principal=self.alice, job=job, action=action)
            except service.IllegalTransition:
                session.rollback()

    @rule(node=st.sampled_from(NODES))
    def lose(self, node: str) -> None:
        """The node falls silent for longer than the timeout, then a pass runs."""
        with self.db.session() as session:
            session.execute(
                update(Node)
                .where(Node.name == node)
                .values(last_heartbeat=utcnow() - timedelta(seconds=120))
            )
            session.commit()
        self.pool.grace_from = utcnow() - timedelta(seconds=120)
        self.pool._last_observed = utcnow()  # no gap: the silence is the node's, not ours
        self.scheduler.tick()

    @rule(node=st.sampled_from(NODES))
    def restart_worker(self, node: str) -> None:
        """The worker is killed and started again at once: a new incarnation."""
        self.instances[node] = uuid.uuid4().hex
        self._register(node)

    @rule(node=st.sampled_from(NODES), keep=st.integers(0, 7))
    def beat(self, node: str, keep: int) -> None:
        """A heartbeat listing some of the attempts the node really runs."""
        running = [a for a, n in self._slices("running") if n == node]
        listed = [a for i, a in enumerate(running) if keep >> (i % 3) & 1]
        beat = Heartbeat(instance=self.instances[node], attempts=listed)
        with self.db.session() as session:
            session.execute(update(AttemptSlice).values(claimed_at=utcnow() - timedelta(hours=1)))
            fencing.heartbeat(session, self.redis, name=node, beat=beat, lease_seconds=30)

    @rule()
    def time_passes(self) -> None:
        """Claim timeouts and restart back-offs run out, then a pass runs."""
        with self.db.session() as session:
            past = utcnow() - timedelta(hours=1)
            session.execute(update(Attempt).values(created_at=past))
            session.execute(update(Job).where(Job.restart_at.is_not(None)).values(restart_at=past))
            session.commit()
        self.scheduler.tick()

    @invariant()
    def devices_are_booked_exactly_by_live_work(self) -> None:
        with self.db.session() as session:
            rows = session.execute(
                select(AttemptSlice, Attempt).join(Attempt, Attempt.id == AttemptSlice.attempt_id)
            ).all()
            live_slices = [(s, a) for s, a in rows if s.state in LIVE_SLICE_VALUES]
            assert all(a.state in LIVE_ATTEMPT_VALUES for _, a in live_slices), [
                (s.id, s.state, a.state) for s, a in live_slices
            ]
            for node in NODES:
                held = [int(d) for s, _ in live_slices if s.node_name == node for d in s.devices]
                assert len(held) == len(set(held)), f"a device of {node} booked twice"
            booked = busy_devices(session)
            expected: dict[str, set[int]] = {}
            for part, _ in live_slices:
                expected.setdefault(part.node_name, set()).update(int(d) for d in part.devices)
            assert booked == expected
            per_attempt: dict[int, list[AttemptSlice]] = {}
            for part, attempt in rows:
                per_attempt.setdefault(attempt.id, []).append(part)
            live_attempts = {a.id: a for _, a in rows if a.state in LIVE_ATTEMPT_VALUES}
            for attempt_id in live_attempts:
                states = {s.state for s in per_attempt[attempt_id]}
                # a live attempt holds its gang: each slice still live, or done (succeeded)
                assert states <= {"scheduled", "running", "succeeded"}, states
                assert states & {"scheduled", "running"}
            jobs = [a.job_id for a in live_attempts.values()]
            assert len(jobs) == len(set(jobs)), "a job with two live attempts"


Cluster.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestBookingInvariant = Cluster.TestCase
#: 25 runs of 30 scheduler steps each on real databases: make test runs it, make test-fast not
pytestmark = pytest.mark.slow
