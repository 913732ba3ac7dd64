"""The node pool executor: Trainboard's own worker nodes (`trainboard worker`), over Celery.

Each node's agent registers, heartbeats and consumes attempt orders from its own Celery
queue (workers/node). Placement is Trainboard's policy over the nodes' free devices
(backend.placement.policy); a node silent for a heartbeat timeout is lost, with its
attempts; a slice its node does not claim in time is withdrawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import redis
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from backend.db import as_utc, utcnow
from backend.deployment_keys import keys_of
from backend.jobs.attempt_end import end_attempt
from backend.jobs.attempt_states import (
    LIVE_ATTEMPT_VALUES,
    LIVE_SLICE_VALUES,
    AttemptState,
    SliceState,
)
from backend.jobs.fencing import end_node_attempts, repair_bookings
from backend.jobs.models import Attempt, AttemptSlice
from backend.nodes.disk import disk_low, explain_disk_low
from backend.nodes.models import Device, Node, NodeState
from backend.placement.policy import NodeCapacity, Plan, QueuedJob, Quota, plan
from backend.placement.preemption import RunningJob
from backend.signals import announce_nodes, request_stops
from workers.contract.protocol import RUN_ATTEMPT_TASK, AttemptOrder, StopRequest
from workers.node.celery_app import direct_queue, warm_sender


def busy_devices(session: Session) -> dict[str, set[int]]:
    """Devices held by a slice that is scheduled or running, per node."""
    busy: dict[str, set[int]] = {}
    for node, devices in session.execute(
        select(AttemptSlice.node_name, AttemptSlice.devices).where(
            AttemptSlice.state.in_(LIVE_SLICE_VALUES)
        )
    ):
        busy.setdefault(node, set()).update(int(i) for i in devices)
    return busy


def capacities(session: Session) -> list[NodeCapacity]:
    """Free devices of every node that is up and not drained."""
    busy = busy_devices(session)
    nodes = session.scalars(
        select(Node).where(Node.state == NodeState.up, Node.drained.is_(False)).order_by(Node.name)
    ).all()
    # the devices' indexes as plain rows: a Device object each (8,000 for 1,000 nodes) was
    # a tenth of a 10k pass's CPU (docs/benchmarks.md, "Scheduler throughput")
    indexes: dict[int, list[int]] = {}
    for node_id, index in session.execute(
        select(Device.node_id, Device.index).order_by(Device.node_id, Device.index)
    ):
        indexes.setdefault(node_id, []).append(index)
    capacity = []
    for node in nodes:
        if disk_low(node) is not None:  # a nearly full data dir takes no new work (it stays up)
            continue
        held = busy.get(node.name, set())
        own = indexes.get(node.id, [])
        free = tuple(i for i in own if i not in held)
        capacity.append(
            NodeCapacity(name=node.name, total=len(own), free=free, storage=node.storage or "")
        )
    return capacity


NO_NODE = (
    "no worker node is registered: start one with `trainboard worker` on a machine with "
    "devices (`trainboard up` starts one itself); a worker that refused to start said why "
    "in its output"
)


def explain_no_node(session: Session, waiting: dict[int, str]) -> None:
    """With no node registered at all (every worker refused to start), every job says so."""
    if waiting and session.scalars(select(Node.id).limit(1)).first() is None:
        waiting.update(dict.fromkeys(waiting, NO_NODE))


class NodePool:
    """Runs attempts on Trainboard's registered worker nodes."""

    name = "nodes"

    def __init__(
        self,
        *,
        client: redis.Redis,
        celery: Any,
        heartbeat_timeout: float,
        claim_timeout: float = 60.0,
    ) -> None:
        self.client = client
        self.celery = celery
        warm_sender(celery)  # not in the first pass's publish: its order's wait
        self.heartbeat_timeout = timedelta(seconds=heartbeat_timeout)
        self.claim_timeout = timedelta(seconds=claim_timeout)
        self.keys = keys_of(client)
        #: silence before this moment is the control plane's own (it was down, not leader,
        #: or stalled): no node is declared lost for it (`_expire_nodes`)
        self.grace_from: datetime | None = None
        self._last_observed: datetime | None = None

    def observe(self, session: Session) -> set[int]:
        """Lost nodes' attempts, unclaimed slices and broken bookings end here."""
        self.still_listening()
        changed = self._expire_nodes(session) | self._withdraw_unclaimed(session)
        return changed | repair_bookings(session)

    def quiet_until(self, session: Session) -> datetime | None:
        """When the first lease of a node that is up runs out (`_expire_nodes`), if none
        beats again before; None while no node is up."""
        oldest = session.scalar(
            select(func.min(Node.last_heartbeat)).where(Node.state == NodeState.up)
        )
        if oldest is None:
            return None
        ends = as_utc(oldest) + self.heartbeat_timeout
        if self.grace_from is not None:
            ends = max(ends, self.grace_from + self.heartbeat_timeout)
        return ends

    def still_listening(self) -> None:
        """The control plane listened now: a gap of more than half a timeout since it last
        did (a restart, another leader, a stall) gives every node a full timeout from now."""
        now = utcnow()
        last, self._last_observed = self._last_observed, now
        if last is None or now - last > self.heartbeat_timeout / 2:
            self.grace_from = now  # (re)started, not leader or stalled: the silence was ours

    def place(
        self,
        session: Session,
        queue: Sequence[QueuedJob],
        *,
        running: Sequence[RunningJob],
        quotas: dict[int, Quota],
    ) -> Plan:
        result = plan(queue, capacities(session), running=running, quotas=quotas)
        explain_no_node(session, result.waiting)  # not "no cluster capacity": no node at all
        explain_disk_low(session, queue, result.waiting)  # a nearly full node says so
        return result

    def address_of(self, session: Session, node: str) -> str:
        return session.scalars(select(Node.address).where(Node.name == node)).one()

    def start(self, orders: Sequence[AttemptOrder]) -> None:
        if not orders:
            return
        # one pipeline for the pass's orders (kombu's publish batch) instead of a round trip,
        # and a new redis-py client, per order: a 10k pass's 1,232 orders are most of its wall
        # time on a loaded machine (docs/benchmarks.md, "Scheduler throughput")
        with self.celery.producer_or_acquire() as producer, producer.batch(max_size=len(orders)):
            for order in orders:
                self.celery.send_task(
                    RUN_ATTEMPT_TASK,
                    args=[order.model_dump(mode="json")],
                    queue=direct_queue(self.keys.node_queue(order.node)),
                    producer=producer,
                    # the anonymous exchange routes by queue name alone: no broker-side
                    # binding (which a Redis flush would erase) is needed to reach the node,
                    # so the queue is not declared (a round trip per node and pass)
                    declare=[],
                    # Celery's own repr of each order (for its logs): a third of the publish's CPU
                    argsrepr=f"[attempt {order.attempt_id} rank-node {order.node_rank}]",
                )

    def stop(self, attempt_ids: Sequence[int], action: StopRequest) -> None:
        request_stops(self.client, attempt_ids=attempt_ids, action=action)

    def _expire_nodes(self, session: Session) -> set[int]:
        """Nodes silent for a whole timeout of the control plane's own uptime are lost."""
        deadline = utcnow() - self.heartbeat_timeout
        if self.grace_from is not None and self.grace_from > deadline:
            return set()  # we have not listened for a full timeout yet
        changed: set[int] = set()
        for node in session.scalars(select(Node).where(Node.state == NodeState.up)):
            if as_utc(node.last_heartbeat) >= deadline:
                continue
            node.state, node.state_reason = NodeState.lost, "stopped heartbeating"
            announce_nodes(self.client)
            changed |= end_node_attempts(
                session, self.client, node.name, reason=f"node {node.name} stopped heartbeating"
            )
        return changed

    def _withdraw_unclaimed(self, session: Session) -> set[int]:
        """A slice no worker claimed in time: its task was lost, or the node cannot get work."""
        deadline = utcnow() - self.claim_timeout
        changed: set[int] = set()
        stale = session.execute(
            select(AttemptSlice, Attempt)
            .join(Attempt, Attempt.id == AttemptSlice.attempt_id)
            .where(
                AttemptSlice.state == SliceState.scheduled,
                Attempt.state.in_(LIVE_ATTEMPT_VALUES),
                Attempt.created_at < deadline,
            )
        ).all()
        for part, attempt in stale:
            if attempt.state not in LIVE_ATTEMPT_VALUES:
                continue  # ended by an earlier slice of the same attempt in this pass
            reason = f"node {part.node_name} did not claim its part"
            end_attempt(
                session,
                self.client,
                attempt,
                state=AttemptState.withdrawn,
                reason=reason,
                platform_fault=True,
            )
            changed.add(attempt.job_id)
        return changed
