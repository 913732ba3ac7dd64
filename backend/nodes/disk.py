"""Disk low: a node whose data dir is nearly full gets no new work (it stays up)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from backend.config import get_settings
from backend.nodes.models import Device, Node, NodeState
from backend.placement.policy import QueuedJob


def disk_low(node: Node) -> str | None:
    """Why the node's data dir is too full for new work ("disk low (312 MiB free)"), or None.

    Low means below the smaller of `disk_low_bytes` and `disk_low_fraction` of the disk:
    1 GiB on a large disk, 5% of a small one (a 16 GiB disk is low under 819 MiB).
    """
    if node.disk_free is None or node.disk_total is None:
        return None  # an agent that does not report it
    settings = get_settings()
    threshold = min(settings.disk_low_bytes, settings.disk_low_fraction * node.disk_total)
    if node.disk_free >= threshold:
        return None
    return f"disk low ({node.disk_free >> 20} MiB free)"


def explain_disk_low(session: Session, queue: Sequence[QueuedJob], waiting: dict[int, str]) -> None:
    """Add to each waiting job's reason the disk-low nodes that are large enough for it."""
    if not waiting:
        return
    rows = session.execute(
        select(Node, func.count(Device.id))
        .outerjoin(Device, Device.node_id == Node.id)
        .where(Node.state == NodeState.up, Node.drained.is_(False), Node.disk_free.is_not(None))
        .group_by(Node.id)
        .order_by(Node.name)
    ).all()
    low = [(node.name, size, why) for node, size in rows if (why := disk_low(node)) is not None]
    for job in queue:
        if job.id in waiting:
            notes = [f"node {name}: {why}" for name, size, why in low if size >= job.per_node]
            waiting[job.id] = "; ".join([waiting[job.id], *notes])
