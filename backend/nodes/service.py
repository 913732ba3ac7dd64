"""Node registration, heartbeats and the cluster view."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from backend.db import utcnow
from backend.jobs.models import Attempt
from backend.nodes.models import Device, Node
from backend.nodes.schemas import DeviceOut, NodeOut
from workers.protocol import NodeRegistration

BUSY_ATTEMPT_STATES = ("scheduled", "running")


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
    node.state = "up"
    node.last_heartbeat = utcnow()
    node.devices = [
        Device(index=d.index, kind=d.kind, name=d.name, uuid=d.uuid, memory_total=d.memory_total)
        for d in registration.devices
    ]
    session.commit()
    return node


def heartbeat(session: Session, *, name: str) -> Node:
    node = session.scalars(select(Node).where(Node.name == name)).first()
    if node is None:
        raise NodeNotFound(f"node {name!r} is not registered")
    node.last_heartbeat = utcnow()
    node.state = "up"
    session.commit()
    return node


def all_nodes(session: Session) -> Sequence[Node]:
    return session.scalars(
        select(Node).options(selectinload(Node.devices)).order_by(Node.name)
    ).all()


def describe_nodes(session: Session) -> list[NodeOut]:
    """Nodes with their devices and which job holds each device."""
    holders: dict[tuple[str, int], tuple[int, int]] = {}
    for attempt in session.scalars(select(Attempt).where(Attempt.state.in_(BUSY_ATTEMPT_STATES))):
        for rank, index in enumerate(attempt.devices):
            holders[(attempt.node_name, int(index))] = (attempt.job_id, rank)
    return [
        NodeOut(
            name=n.name,
            hostname=n.hostname,
            address=n.address,
            state=n.state,
            drained=n.drained,
            last_heartbeat=n.last_heartbeat,
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
