"""What registration checks for nodes that must reach each other: address and run root."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.nodes.models import Node
from workers.contract.addresses import is_loopback
from workers.contract.protocol import NodeRegistration


def address_problem(registration: NodeRegistration) -> str | None:
    """Why peers could not reach this node at its advertised address (None: they may)."""
    api = registration.api_host
    if api is None:
        return None  # an agent that does not say where the API is: nothing to compare
    if registration.interface is None:
        return (
            f"advertised address {registration.address} is on none of this host's interfaces: "
            "its ranks cannot listen there; set TRAINBOARD_ADDRESS to one of its addresses or "
            "TRAINBOARD_INTERFACE to the interface that reaches the other nodes"
        )
    if not is_loopback(registration.address) or is_loopback(api):
        return None
    return (
        f"advertised address {registration.address} is loopback while the API is at {api}: "
        "other hosts cannot reach this node's ranks; unset TRAINBOARD_ADDRESS (it is derived "
        "from the route to the API) or set it to an address on that network"
    )


def storage_group(session: Session, registration: NodeRegistration) -> str:
    """The run-root group of a registering node: that of a live node whose marker it sees.

    A marker counts only if it holds that node's current instance (written at its own
    registration, so a stale copy of an old run root proves nothing); else the node starts
    a group of its own, named by its instance.
    """
    seen = registration.storage_seen
    if not seen:
        return registration.instance
    rows = session.execute(
        select(Node.name, Node.instance, Node.storage).where(Node.name.in_(seen))
    ).all()
    groups = sorted(
        storage for name, instance, storage in rows if storage and instance == seen[name]
    )
    return groups[0] if groups else registration.instance


def gang_addresses(session: Session, nodes: list[str]) -> str:
    """Each node of a gang with the address and interface its ranks use, for a reason."""
    rows = session.execute(
        select(Node.name, Node.address, Node.interface).where(Node.name.in_(nodes))
    ).all()
    where = {
        name: f"{name} at {address} ({interface or 'interface unknown'})"
        for name, address, interface in rows
    }
    return ", ".join(where.get(name, name) for name in nodes)
