"""Which attempt rank runs on which local device slot, filled by the supervisor."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import psutil

#: how far up the process tree a GPU process is traced to a rank (rank → its workers)
MAX_ANCESTORS = 8


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

    def assign(self, slot: int, occupant: Occupant) -> None:
        """Record that a rank process now runs on slot."""
        with self._lock:
            self._slots[slot] = occupant

    def release(self, slot: int, pid: int | None = None) -> None:
        """Free slot (only if it still belongs to pid, when given)."""
        with self._lock:
            current = self._slots.get(slot)
            if current is not None and (pid is None or current.pid == pid):
                del self._slots[slot]

    def get(self, slot: int) -> Occupant | None:
        """The rank process on slot, or None when it is idle."""
        with self._lock:
            return self._slots.get(slot)

    def snapshot(self) -> dict[int, Occupant]:
        """A copy of the whole map."""
        with self._lock:
            return dict(self._slots)

    def owner_of(self, pid: int) -> Occupant | None:
        """The rank process that is pid or one of its ancestors (a rank's workers count)."""
        ranks = {occupant.pid: occupant for occupant in self.snapshot().values()}
        if not ranks:
            return None
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
