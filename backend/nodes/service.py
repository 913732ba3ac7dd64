"""Node registration, heartbeats and the cluster view."""

from __future__ import annotations

from collections.abc import Sequence

import redis
from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from backend.db import utcnow
from backend.nodes.deployment import WRONG_REDIS, broker_shared, deployment_id
from backend.nodes.disk import disk_low
from backend.nodes.models import Device, Node, NodeState
from backend.nodes.multihost import address_problem, storage_group
from backend.nodes.schemas import DiskOut, HostOut
from workers.contract.protocol import Heartbeat, HeartbeatReply, NodeRegistration


class NodeNotFound(LookupError):
    pass


#: NodeOut fields copied from the node row as they are
NODE_FIELDS = (
    "name hostname address interface storage state_reason incarnation drained last_heartbeat"
)


def record_registration(
    session: Session, client: redis.Redis, *, registration: NodeRegistration
) -> tuple[Node, str | None]:
    """Create or refresh a node and replace its device list (uncommitted); (node, why its
    previous incarnation's attempts must end: None when this is the same instance).

    A new instance is a new incarnation: backend.jobs.fencing ends the previous one's
    attempts (lost, restarted from their newest checkpoint) in the same transaction.
    """
    node = session.scalars(select(Node).where(Node.name == registration.name)).first()
    replaced: str | None = None
    if node is None:
        node = Node(
            name=registration.name, hostname=registration.hostname, address=registration.address
        )
        session.add(node)
    if node.instance != registration.instance:
        if node.instance is not None:
            replaced = f"node {registration.name} restarted (incarnation {node.incarnation + 1})"
        node.incarnation = (node.incarnation or 0) + 1
        node.instance = registration.instance
    node.hostname = registration.hostname
    node.address = registration.address
    node.data_dir = registration.data_dir
    node.interface = registration.interface
    node.storage = storage_group(session, registration)
    node.state, node.state_reason = NodeState.up, None
    if (problem := address_problem(registration)) is not None:
        node.state, node.state_reason = NodeState.misconfigured, problem
    if registration.deployments_seen is not None:
        _check_broker(
            session, client, node, deployment_id(session) in registration.deployments_seen
        )
    node.last_heartbeat = utcnow()
    known = {d.index: d for d in node.devices}
    wanted = {d.index for d in registration.devices}
    for gone in [d for d in node.devices if d.index not in wanted]:
        node.devices.remove(gone)
    for offered in registration.devices:
        device = known.get(offered.index)
        if device is None:
            device = Device(index=offered.index)
            node.devices.append(device)
        device.kind, device.name = offered.kind, offered.name
        device.uuid, device.memory_total = offered.uuid, offered.memory_total
    return node, replaced


def record_heartbeat(
    session: Session, client: redis.Redis, *, name: str, beat: Heartbeat, lease_seconds: float
) -> tuple[Node, HeartbeatReply | None]:
    """Record a heartbeat's facts (uncommitted); (node, the reply at once when it is not
    a sign of life). backend.jobs.fencing then reconciles the node's attempts.

    A heartbeat from another instance than the registered one, or from a node declared
    lost, is not a sign of life: that node must stop everything it runs and register.
    """
    node = session.scalars(select(Node).where(Node.name == name)).first()
    if node is None:
        raise NodeNotFound(f"node {name!r} is not registered")
    if node.instance != beat.instance or node.state == NodeState.lost:
        reply = HeartbeatReply(
            drained=node.drained,
            stop=sorted(set(beat.attempts)),
            reregister=True,
            lease_seconds=lease_seconds,
        )
        return node, reply
    node.last_heartbeat = utcnow()
    _check_broker(session, client, node, beat.deployment_seen)
    host = beat.host
    if host is not None:
        node.host_cpu_percent, node.host_cpus = host.cpu_percent, host.cpus
        node.host_memory_used, node.host_memory_total = host.memory_used, host.memory_total
    if beat.disk is not None:
        node.disk_free, node.disk_total = beat.disk.free, beat.disk.total
    return node, None


def _check_broker(session: Session, client: redis.Redis, node: Node, seen: bool | None) -> None:
    """A node whose Redis lacks our marker is misconfigured; it is up again once it has it."""
    if seen is None:
        return  # the worker does not know our id yet (it learns it at registration)
    shared = broker_shared(client, deployment_id(session), seen)
    if not shared and node.state == NodeState.up:
        node.state, node.state_reason = NodeState.misconfigured, WRONG_REDIS
    elif shared and node.state == NodeState.misconfigured and node.state_reason == WRONG_REDIS:
        node.state, node.state_reason = NodeState.up, None


def all_nodes(session: Session, *, name: str | None = None) -> Sequence[Node]:
    """Every node (or only the one named), with its devices, by name."""
    query = select(Node).options(selectinload(Node.devices)).order_by(Node.name)
    if name is not None:
        query = query.where(Node.name == name)
    return session.scalars(query).all()


def host_view(node: Node) -> HostOut | None:
    """The node's machine load as last reported (None before an agent sent any)."""
    if node.host_cpu_percent is None:
        return None
    return HostOut(
        cpu_percent=node.host_cpu_percent,
        cpus=node.host_cpus,
        memory_used=node.host_memory_used,
        memory_total=node.host_memory_total,
    )


def disk_view(node: Node) -> DiskOut | None:
    """The data dir's space as last reported, and whether it is too low for new work."""
    if node.disk_free is None or node.disk_total is None:
        return None
    reason = disk_low(node)
    return DiskOut(
        free=node.disk_free, total=node.disk_total, low=reason is not None, reason=reason
    )
