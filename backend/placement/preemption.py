"""Choosing preemption victims, a pure part of the placement policy.

A queued job that cannot fit takes devices from running jobs of strictly lower
priority: lowest priority first, then the youngest attempt, never a job that may not be
preempted, and never more victims than it needs (a victim whose devices turn out not
to be needed is spared). Devices of jobs already stopping count as soon free, so a job
waits for its earlier victims instead of picking new ones every pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RunningJob:
    """A job holding devices now: a possible victim, or one already stopping."""

    id: int
    priority: int
    slices: tuple[tuple[str, int], ...]  # (node, devices held there)
    started: float = 0.0  # its attempt's start: the youngest (largest) goes first
    preemptible: bool = True  # false: marked so, preempted recently, or not claimed yet
    stopping: bool = False  # asked to stop already: its devices are free soon
    owner: int = 0

    def devices_on(self, node: str) -> int:
        if len(self.slices) == 1:
            return self.slices[0][1] if self.slices[0][0] == node else 0
        return sum(count for name, count in self.slices if name == node)


@dataclass(frozen=True)
class Preemption:
    victim: int
    by: int


class Victims:
    """The running jobs by node, minus those already chosen in this pass."""

    def __init__(self, running: Iterable[RunningJob]) -> None:
        self.on: dict[str, list[RunningJob]] = {}
        self.pending: dict[str, int] = {}  # devices of stopping jobs, per node
        for job in sorted(running, key=lambda r: (-r.priority, -r.started, -r.id)):
            for node, count in job.slices:
                if job.stopping:
                    self.pending[node] = self.pending.get(node, 0) + count
                elif job.preemptible:
                    self.on.setdefault(node, []).append(job)
        self.chosen: set[int] = set()
        #: nodes where a victim could be found or devices are about to be freed
        self.hopeful: set[str] = set(self.on) | set(self.pending)
        self.lowest = max((r.priority for js in self.on.values() for r in js), default=-1)

    def needed_on(
        self, node: str, *, free: int, need: int, priority: int
    ) -> list[RunningJob] | None:
        """The fewest victims on `node` that make `need` devices free; None if none do."""
        have = free + self.pending.get(node, 0)
        taken: list[RunningJob] = []
        for job in self.on.get(node, ()):
            if have >= need:
                break
            if job.priority > priority and job.id not in self.chosen:
                taken.append(job)
                have += job.devices_on(node)
        if have < need:
            return None
        for job in reversed(taken[:]):  # spare, most valuable first, whoever is not needed
            if have - job.devices_on(node) >= need:
                taken.remove(job)
                have -= job.devices_on(node)
        return taken

    def take(self, jobs: Sequence[RunningJob]) -> None:
        for job in jobs:
            self.chosen.add(job.id)
            for node, count in job.slices:
                self.pending[node] = self.pending.get(node, 0) + count
                self.hopeful.add(node)
