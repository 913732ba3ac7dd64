"""Which attempt rank runs on which local device slot, filled by the supervisor."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import psutil

#: how far up the process tree a GPU process is traced to a rank (rank → its workers)
MAX_ANCESTORS = 8
#: pids whose owner is remembered at once, and for how long
MAX_TRACED = 4096
TRACE_SECONDS = 60.0
T = TypeVar("T")


@dataclass(frozen=True)
class Occupant:
    """One rank process running on a device slot."""

    attempt_id: int
    rank: int
    pid: int


class DeviceRegistry:
    """Thread-safe map from device slot index to the rank process using it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[int, Occupant] = {}
        #: pid → its owner as last traced; cleared whenever a slot changes hands
        self._owners: dict[int, Occupant | None] = {}
        self._generation = 0  # slot changes so far: a trace across one is not kept
        self._traced_since = time.monotonic()
        #: attempt id → every process of the attempt now (its cgroup or its uid)
        self._members: dict[int, Callable[[], set[int]]] = {}

    def track(self, attempt_id: int, members: Callable[[], set[int]]) -> None:
        """Account every process `members()` lists to the attempt, not only its ranks."""
        with self._lock:
            self._members[attempt_id] = members
            self._forget_owners()

    def untrack(self, attempt_id: int) -> None:
        """The attempt ended: its processes are no longer listed."""
        with self._lock:
            self._members.pop(attempt_id, None)
            self._forget_owners()

    def processes_on(self, slot: int) -> list[int]:
        """The pids whose use counts on slot: its rank, the rank's descendants, and (on the
        attempt's first slot) the attempt's processes no rank is an ancestor of, such as a
        daemon that left its rank's session."""
        with self._lock:
            occupant = self._slots.get(slot)
            if occupant is None:
                return []
            members = self._members.get(occupant.attempt_id)
            ranks = {
                o.pid: index
                for index, o in self._slots.items()
                if o.attempt_id == occupant.attempt_id
            }
        pids = (members() if members is not None else set()) | {occupant.pid}
        first = min(ranks.values())  # where what left every rank's tree is counted
        mine = []
        for pid in pids:
            owner = _nearest(pid, ranks)
            if (first if owner is None else owner) == slot:
                mine.append(pid)
        return sorted(mine)

    def assign(self, slot: int, occupant: Occupant) -> None:
        """Record that a rank process now runs on slot."""
        with self._lock:
            self._slots[slot] = occupant
            self._forget_owners()

    def release(self, slot: int, pid: int | None = None) -> None:
        """Free slot (only if it still belongs to pid, when given)."""
        with self._lock:
            current = self._slots.get(slot)
            if current is not None and (pid is None or current.pid == pid):
                del self._slots[slot]
                self._forget_owners()

    def get(self, slot: int) -> Occupant | None:
        """The rank process on slot, or None when it is idle."""
        with self._lock:
            return self._slots.get(slot)

    def snapshot(self) -> dict[int, Occupant]:
        """A copy of the whole map."""
        with self._lock:
            return dict(self._slots)

    def owner_of(self, pid: int) -> Occupant | None:
        """The rank process that is pid or one of its ancestors (a rank's workers count).

        Traced once per pid while the slots stay as they are: a process's ancestry does
        not change, and walking /proc for every GPU process at every sample cost more than
        the NVML calls themselves (benchmarks/sampling_cost.py).
        """
        with self._lock:
            if time.monotonic() - self._traced_since > TRACE_SECONDS:
                self._forget_owners()  # pids are reused, eventually
            if pid in self._owners:
                return self._owners[pid]
            ranks = {occupant.pid: occupant for occupant in self._slots.values()}
            members = dict(self._members)
            generation = self._generation
        owner = _nearest(pid, ranks) if ranks else None
        if owner is None:  # left its rank's tree (setsid, double fork): still its attempt's
            owner = next(
                (
                    min((o for o in ranks.values() if o.attempt_id == attempt), key=_by_rank)
                    for attempt, listed in members.items()
                    if any(o.attempt_id == attempt for o in ranks.values()) and pid in listed()
                ),
                None,
            )
        with self._lock:
            if generation == self._generation and len(self._owners) < MAX_TRACED:
                self._owners[pid] = owner
        return owner

    def _forget_owners(self) -> None:
        self._owners.clear()
        self._generation += 1
        self._traced_since = time.monotonic()


def _by_rank(occupant: Occupant) -> int:
    return occupant.rank


def _nearest(pid: int, ranks: Mapping[int, T]) -> T | None:
    """What ranks maps pid, or its nearest ancestor within MAX_ANCESTORS, to; None if none."""
    for _ in range(MAX_ANCESTORS + 1):
        if pid in ranks:
            return ranks[pid]
        try:
            pid = psutil.Process(pid).ppid()
        except (psutil.Error, ValueError):
            return None
        if pid <= 1:
            return None
    return None
