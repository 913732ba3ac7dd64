"""Refusing at submission a job whose gang no registered node (or set of nodes) could ever hold."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from backend.nodes.models import Node
from backend.placement.policy import NodeCapacity, QueuedJob
from backend.placement.policy import _could_ever_hold as could_ever_hold
from workers.contract.spec import JobSpec


def never_fits(session: Session, spec: JobSpec) -> str | None:
    """Why no registered node could ever hold the job's gang; None when some could.

    Every registered node counts, down or drained ones too (they may come back); with no
    node registered yet (a deployment starting) nothing is refused. The scheduler's own
    rule (policy's could-ever-hold: enough large nodes sharing one run root) decides.
    """
    nodes = list(session.scalars(select(Node).options(selectinload(Node.devices))))
    if not nodes:
        return None
    devices, count = spec.parallelism.devices, spec.parallelism.nodes
    job = QueuedJob(id=0, devices=devices, nodes=count)
    sizes = [
        NodeCapacity(name=n.name, total=len(n.devices), free=(), storage=n.storage or "")
        for n in nodes
    ]
    if could_ever_hold(job, sizes):
        return None
    largest = max(nodes, key=lambda n: (len(n.devices), n.name))
    wanted = f"{devices} devices"
    if count > 1:
        wanted = f"{count} nodes with {job.per_node} devices each"
    large = sum(1 for n in nodes if len(n.devices) >= job.per_node)
    found = (
        f"the largest node, {largest.name}, has {len(largest.devices)}"
        if count == 1 or large == 0
        else f"only {large} registered node{'s' if large != 1 else ''} sharing a run root "
        f"have {job.per_node} or more (the largest, {largest.name}, has {len(largest.devices)})"
    )
    return (
        f"no registered node could ever hold this job: it needs {wanted}; {found}. "
        "Set wait_for_capacity: true to queue it until such capacity registers"
    )
