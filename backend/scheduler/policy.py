"""Placement policy as a pure function: queue + free devices in, gang placements out.

Order is priority, then submission. A job that cannot start now reserves the nodes it
will get first, so later jobs only backfill devices it could not use anyway; a wide job
is never starved by a stream of narrow ones. Placement packs: the fitting node with the
fewest free devices wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
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
    storage: str = ""  # run-root group: a multi-node job's nodes must share one


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


class _OpenNodes:
    """Unreserved nodes bucketed by free-device count, in a stable order within a bucket."""

    def __init__(self, nodes: Sequence[NodeCapacity]) -> None:
        self.free = {n.name: sorted(n.free) for n in nodes}
        self.total = {n.name: n.total for n in nodes}
        self.buckets: dict[int, dict[str, None]] = {}
        for node in nodes:
            self.buckets.setdefault(len(self.free[node.name]), {})[node.name] = None
        self.most = max((n.total for n in nodes), default=0)

    def fewest_first(self, at_least: int) -> Iterator[str]:
        """Open nodes with at least `at_least` free devices, fullest (fewest free) first."""
        for count in range(at_least, self.most + 1):
            yield from self.buckets.get(count, {})

    def most_free_first(self, capable_of: int) -> Iterator[str]:
        """Open nodes whose size is at least `capable_of`, most free devices first."""
        for count in range(self.most, -1, -1):
            yield from (n for n in self.buckets.get(count, {}) if self.total[n] >= capable_of)

    def take(self, name: str, count: int) -> tuple[int, ...]:
        self._unlist(name)
        taken, self.free[name] = self.free[name][:count], self.free[name][count:]
        self.buckets.setdefault(len(self.free[name]), {})[name] = None
        return tuple(taken)

    def reserve(self, name: str) -> None:
        self._unlist(name)

    def _unlist(self, name: str) -> None:
        del self.buckets[len(self.free[name])][name]


def plan(queue: Sequence[QueuedJob], nodes: Sequence[NodeCapacity]) -> Plan:
    """Decide which queued jobs start now and on which devices."""
    open_nodes = _OpenNodes(nodes)
    storage = {n.name: n.storage for n in nodes}
    result = Plan()
    for job in queue_order(queue):
        chosen = _first(open_nodes.fewest_first(job.per_node), job.nodes, storage)
        if len(chosen) == job.nodes:
            slices = tuple((name, open_nodes.take(name, job.per_node)) for name in chosen)
            result.placements.append(Placement(job.id, slices))
            continue
        if not _could_ever_hold(job, nodes):
            result.waiting[job.id] = (
                f"no cluster capacity: needs {job.nodes} node(s) with {job.per_node} devices each"
            )
            if job.nodes > 1 and _could_ever_hold(job, nodes, shared=False):
                result.waiting[job.id] += (
                    " sharing one checkpoint location (run root); the nodes that are large "
                    "enough do not see each other's files: see docs/deploy.md"
                )
            continue
        soonest = _first(open_nodes.most_free_first(job.per_node), job.nodes, storage)
        if len(soonest) < job.nodes:
            result.waiting[job.id] = "waiting behind jobs of higher priority or earlier submission"
            continue
        for name in soonest:
            open_nodes.reserve(name)
        plural = "s" if job.devices > 1 else ""
        result.waiting[job.id] = f"waiting for {job.devices} free device{plural}"
    return result


def _could_ever_hold(job: QueuedJob, nodes: Sequence[NodeCapacity], shared: bool = True) -> bool:
    """Whether enough nodes are large enough (sharing one run root, for a multi-node job)."""
    large = [n for n in nodes if n.total >= job.per_node]
    if job.nodes == 1 or not shared:
        return len(large) >= job.nodes
    groups: dict[str, int] = {}
    for node in large:
        groups[node.storage] = groups.get(node.storage, 0) + 1
    return max(groups.values(), default=0) >= job.nodes


def _first(names: Iterator[str], count: int, storage: dict[str, str]) -> list[str]:
    """The first `count` names in order that share one run root (the first group to fill)."""
    groups: dict[str, list[str]] = {}
    for name in names:
        chosen = groups.setdefault(storage[name], [])
        chosen.append(name)
        if len(chosen) == count:
            return chosen
    return max(groups.values(), key=len, default=[])
