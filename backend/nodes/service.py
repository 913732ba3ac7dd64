"""Node registration, heartbeats and the cluster view."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from backend.db import utcnow
from backend.jobs.models import Attempt, AttemptSlice
from backend.nodes.models import Device, Node
from backend.nodes.schemas import DeviceOut, HostOut, NodeOut
from workers.contract.protocol import HostStats, NodeRegistration

BUSY_SLICE_STATES = ("scheduled", "running")


class NodeNotFound(LookupError):
    pass


def register(session: Session, *, registration: NodeRegistration) -> Node:
    """Create or refresh a node and replace its device list."""
    node = session.scalars(select(Node).where(Node.name == registration.name)).first()
    if node is None:
        node = Node(
            name=registration.name, hostname=registration.hostname, address=registration.address
        )
        session.add(node)
    node.hostname = registration.hostname
    node.address = registration.address
    node.data_dir = registration.data_dir
    node.state = "up"
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
    session.commit()
    return node


def heartbeat(session: Session, *, name: str, host: HostStats | None = None) -> Node:
    node = session.scalars(select(Node).where(Node.name == name)).first()
    if node is None:
        raise NodeNotFound(f"node {name!r} is not registered")
    node.last_heartbeat = utcnow()
    node.state = "up"
    if host is not None:
        node.host_cpu_percent, node.host_cpus = host.cpu_percent, host.cpus
        node.host_memory_used, node.host_memory_total = host.memory_used, host.memory_total
    session.commit()
    return node


def all_nodes(session: Session) -> Sequence[Node]:
    return session.scalars(
        select(Node).options(selectinload(Node.devices)).order_by(Node.name)
    ).all()


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


def describe_nodes(session: Session) -> list[NodeOut]:
    """Nodes with their devices and which job holds each device."""
    holders: dict[tuple[str, int], tuple[int, int]] = {}
    live = session.execute(
        select(AttemptSlice, Attempt.job_id)
        .join(Attempt, Attempt.id == AttemptSlice.attempt_id)
        .where(AttemptSlice.state.in_(BUSY_SLICE_STATES))
    ).all()
    for part, job_id in live:
        for local_rank, index in enumerate(part.devices):
            holders[(part.node_name, int(index))] = (
                job_id,
                part.node_rank * len(part.devices) + local_rank,
            )
    return [
        NodeOut(
            name=n.name,
            hostname=n.hostname,
            address=n.address,
            state=n.state,
            drained=n.drained,
            last_heartbeat=n.last_heartbeat,
            host=host_view(n),
            devices=[
                DeviceOut(
                    index=d.index,
                    kind=d.kind,
                    name=d.name,
                    uuid=d.uuid,
                    memory_total=d.memory_total,
                    job_id=holders.get((n.name, d.index), (None, None))[0],
                    rank=holders.get((n.name, d.index), (None, None))[1],
                )
                for d in n.devices
            ],
        )
        for n in all_nodes(session)
    ]
