"""Placement policy as a pure function: queue + free devices in, gang placements out.

Order is priority, then submission. A job that cannot start now reserves the nodes it
will get first, so later jobs only backfill devices it could not use anyway; a wide job
is never starved by a stream of narrow ones. Placement packs: the fitting node with the
fewest free devices wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class QueuedJob:
    id: int
    devices: int
    nodes: int = 1
    priority: int = 1  # 0 high, 1 normal, 2 low
    order: int = 0  # submission order

    @property
    def per_node(self) -> int:
        return self.devices // self.nodes


@dataclass(frozen=True)
class NodeCapacity:
    name: str
    total: int
    free: tuple[int, ...]


@dataclass(frozen=True)
class Placement:
    job_id: int
    slices: tuple[tuple[str, tuple[int, ...]], ...]  # (node, device indexes) per node


@dataclass
class Plan:
    placements: list[Placement] = field(default_factory=list)
    waiting: dict[int, str] = field(default_factory=dict)


def queue_order(jobs: Iterable[QueuedJob]) -> list[QueuedJob]:
    return sorted(jobs, key=lambda j: (j.priority, j.order, j.id))


def plan(queue: Sequence[QueuedJob], nodes: Sequence[NodeCapacity]) -> Plan:
    """Decide which queued jobs start now and on which devices."""
    free = {n.name: sorted(n.free) for n in nodes}
    reserved: set[str] = set()
    result = Plan()
    for job in queue_order(queue):
        open_nodes = [n for n in nodes if n.name not in reserved]
        fitting = [n for n in open_nodes if len(free[n.name]) >= job.per_node]
        if len(fitting) >= job.nodes:
            chosen = sorted(fitting, key=lambda n: (len(free[n.name]), n.name))[: job.nodes]
            slices = []
            for node in chosen:
                taken, free[node.name] = (
                    free[node.name][: job.per_node],
                    free[node.name][job.per_node :],
                )
                slices.append((node.name, tuple(taken)))
            result.placements.append(Placement(job.id, tuple(slices)))
            continue
        capable = [n for n in nodes if n.total >= job.per_node]
        if len(capable) < job.nodes:
            result.waiting[job.id] = (
                f"no cluster capacity: needs {job.nodes} node(s) with {job.per_node} devices each"
            )
            continue
        unreserved = [n for n in capable if n.name not in reserved]
        if len(unreserved) < job.nodes:
            result.waiting[job.id] = "waiting behind jobs of higher priority or earlier submission"
            continue
        soonest = sorted(unreserved, key=lambda n: (-len(free[n.name]), n.name))[: job.nodes]
        reserved.update(n.name for n in soonest)
        plural = "s" if job.devices > 1 else ""
        result.waiting[job.id] = f"waiting for {job.devices} free device{plural}"
    return result
