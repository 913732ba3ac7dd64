"""Placement policy as a pure function: queue + free devices in, gang placements out.

Order is priority, then fair share (the owner's factor 2^(-usage/share), highest
first), then submission. A job over its owner's quota waits and blocks nobody. A job
that cannot start now preempts lower-priority running jobs if that makes it fit
(`preemption`), else reserves the nodes it will get first, so later jobs only backfill
devices it could not use anyway; a wide job is never starved by a stream of narrow
ones. Placement packs: the fitting node with the fewest free devices wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from backend.placement.preemption import Preemption, RunningJob, Victims


@dataclass(frozen=True)
class QueuedJob:
    id: int
    devices: int
    nodes: int = 1
    priority: int = 1  # 0 high, 1 normal, 2 low
    order: int = 0  # submission order
    owner: int = 0
    fair_share: float = 1.0  # the owner's 2^(-usage/share): among equal priority, higher first

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


@dataclass(frozen=True)
class Quota:
    """An owner's limits and what it holds now (None: no limit)."""

    max_devices: int | None = None
    devices_in_use: int = 0
    max_device_hours: float | None = None  # per rolling 7 days
    device_hours: float = 0.0  # allocated in the last 7 days, running attempts included


@dataclass
class Plan:
    placements: list[Placement] = field(default_factory=list)
    waiting: dict[int, str] = field(default_factory=dict)
    preemptions: list[Preemption] = field(default_factory=list)


def queue_order(jobs: Iterable[QueuedJob]) -> list[QueuedJob]:
    """The one order of the queue: priority, then fair share, then submission."""
    return sorted(jobs, key=lambda j: (j.priority, -j.fair_share, j.order, j.id))


class _OpenNodes:
    """Unreserved nodes bucketed by free-device count, in a stable order within a bucket."""

    def __init__(self, nodes: Sequence[NodeCapacity]) -> None:
        self.free = {n.name: sorted(n.free) for n in nodes}
        self.total = {n.name: n.total for n in nodes}
        self.buckets: dict[int, dict[str, None]] = {}
        for node in nodes:
            self.buckets.setdefault(len(self.free[node.name]), {})[node.name] = None
        self.most = max((n.total for n in nodes), default=0)
        self.unreserved: set[str] = {n.name for n in nodes}

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
        self.unreserved.discard(name)

    def _unlist(self, name: str) -> None:
        del self.buckets[len(self.free[name])][name]


def plan(
    queue: Sequence[QueuedJob],
    nodes: Sequence[NodeCapacity],
    *,
    running: Sequence[RunningJob] = (),
    quotas: Mapping[int, Quota] | None = None,
) -> Plan:
    """Decide which queued jobs start now and on which devices, and which jobs to preempt."""
    open_nodes = _OpenNodes(nodes)
    storage = {n.name: n.storage for n in nodes}
    victims = Victims(running)
    in_use = {owner: q.devices_in_use for owner, q in (quotas or {}).items()}
    hopeless: set[tuple[int, int, int]] = set()  # (priority, per node, nodes) found no victims
    ever: dict[tuple[int, int, bool], bool] = {}  # (per node, nodes, shared): could ever hold
    result = Plan()
    for job in queue_order(queue):
        quota = (quotas or {}).get(job.owner)
        if quota is not None and (over := _over_quota(job, quota, in_use[job.owner])):
            result.waiting[job.id] = over
            continue
        chosen = _first(open_nodes.fewest_first(job.per_node), job.nodes, storage)
        if len(chosen) == job.nodes:
            slices = tuple((name, open_nodes.take(name, job.per_node)) for name in chosen)
            result.placements.append(Placement(job.id, slices))
            if quota is not None:
                in_use[job.owner] += job.devices
            continue
        if not _could_ever_hold(job, nodes, known=ever):
            result.waiting[job.id] = (
                f"no cluster capacity: needs {job.nodes} node(s) with {job.per_node} devices each"
            )
            if job.nodes > 1 and _could_ever_hold(job, nodes, shared=False, known=ever):
                result.waiting[job.id] += (
                    " sharing one checkpoint location (run root); the nodes that are large "
                    "enough do not see each other's files: see docs/deploy.md"
                )
            continue
        shape = (job.priority, job.per_node, job.nodes)
        if not any(h[0] <= shape[0] and h[1] <= shape[1] and h[2] <= shape[2] for h in hopeless):
            taken = _preempt(job, open_nodes, victims, storage)
            if taken is not None:
                _wait_for_victims(job, taken, result)
                continue
            hopeless.add(shape)  # a later job as urgent or less, as wide or more, finds none
        soonest = _first(open_nodes.most_free_first(job.per_node), job.nodes, storage)
        if len(soonest) < job.nodes:
            result.waiting[job.id] = "waiting behind jobs of higher priority or earlier submission"
            continue
        for name in soonest:
            open_nodes.reserve(name)
        plural = "s" if job.devices > 1 else ""
        result.waiting[job.id] = f"waiting for {job.devices} free device{plural}"
    return result


def _over_quota(job: QueuedJob, quota: Quota, in_use: int) -> str | None:
    """Why the owner's quota keeps this job waiting, if it does."""
    if quota.max_device_hours is not None and quota.device_hours >= quota.max_device_hours:
        return (
            f"over quota: {quota.device_hours:.1f} of {quota.max_device_hours:g} device-hours "
            "used in the last 7 days"
        )
    if quota.max_devices is not None and in_use + job.devices > quota.max_devices:
        return (
            f"over quota: {in_use} of {quota.max_devices} devices in use; "
            f"this job needs {job.devices}"
        )
    return None


def _preempt(
    job: QueuedJob, open_nodes: _OpenNodes, victims: Victims, storage: dict[str, str]
) -> list[RunningJob] | None:
    """Reserve the nodes where the fewest lower-priority devices make the job fit; its victims.

    None when no set of victims (or devices already being freed) makes it fit.
    """
    if job.priority >= victims.lowest and not victims.pending:
        return None
    costs: list[tuple[int, str, list[RunningJob]]] = []
    unreserved = open_nodes.unreserved
    pending = (count for name, count in victims.pending.items() if name in unreserved)
    most_pending, best = max(pending, default=0), None
    for name in open_nodes.most_free_first(job.per_node):  # unreserved, large enough
        if name not in victims.hopeful:
            continue
        free = len(open_nodes.free[name])
        if job.nodes == 1 and best is not None and job.per_node - free - most_pending >= best:
            break  # no node from here needs fewer victim devices than the best one found
        taken = victims.needed_on(name, free=free, need=job.per_node, priority=job.priority)
        if taken is not None:
            cost = sum(v.devices_on(name) for v in taken)
            costs.append((cost, name, taken))
            best = cost if best is None else min(best, cost)
    costs.sort(key=lambda c: (c[0], c[1]))
    chosen = _first((name for _, name, _ in costs), job.nodes, storage)
    if len(chosen) < job.nodes:
        return None
    picked = {name: taken for _, name, taken in costs if name in chosen}
    found: dict[int, RunningJob] = {v.id: v for name in chosen for v in picked[name]}
    victims.take(list(found.values()))
    for name in chosen:
        open_nodes.reserve(name)
        victims.pending.pop(name, None)  # reserved: its soon-free devices are this job's
    return list(found.values())


def _wait_for_victims(job: QueuedJob, taken: list[RunningJob], result: Plan) -> None:
    plural = "s" if job.devices > 1 else ""
    if not taken:
        result.waiting[job.id] = f"waiting for {job.devices} free device{plural}"
        return
    result.preemptions += [Preemption(victim=v.id, by=job.id) for v in taken]
    ids = ", ".join(str(v.id) for v in sorted(taken, key=lambda v: v.id))
    result.waiting[job.id] = (
        f"preempting lower-priority job{'s' if len(taken) > 1 else ''} {ids} "
        f"for {job.devices} device{plural} (they checkpoint first)"
    )


def _could_ever_hold(
    job: QueuedJob,
    nodes: Sequence[NodeCapacity],
    shared: bool = True,
    *,
    known: dict[tuple[int, int, bool], bool] | None = None,
) -> bool:
    """Whether enough nodes are large enough (sharing one run root, for a multi-node job)."""
    key = (job.per_node, job.nodes, shared)
    if known is None:
        return _holds(job, nodes, shared)
    if key not in known:
        known[key] = _holds(job, nodes, shared)
    return known[key]


def _holds(job: QueuedJob, nodes: Sequence[NodeCapacity], shared: bool) -> bool:
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
