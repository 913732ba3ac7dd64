"""Admin control of nodes: drain (no new jobs; running ones finish) and undrain."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.nodes.models import Node
from backend.nodes.service import NodeNotFound


def set_drained(session: Session, *, name: str, drained: bool) -> Node:
    """Mark a node drained or not; the scheduler stops or resumes placing jobs on it."""
    node = session.scalars(select(Node).where(Node.name == name)).first()
    if node is None:
        raise NodeNotFound(f"node {name!r} is not registered")
    node.drained = drained
    session.commit()
    return node
