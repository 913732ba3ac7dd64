"""CPU slots of a GPU-less machine: each slot reports its rank process's CPU % and RSS."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import psutil

from workers.contract.protocol import DeviceSample, DiskSpace, HostStats, NodeDevice
from workers.devices.registry import DeviceRegistry


def host_stats() -> HostStats:
    """The machine's CPU use since the previous call (all cores) and its memory in use."""
    memory = psutil.virtual_memory()
    return HostStats(
        cpu_percent=min(100.0, psutil.cpu_percent(interval=None)),
        cpus=psutil.cpu_count() or 1,
        memory_used=memory.total - memory.available,
        memory_total=memory.total,
    )


def disk_space(path: Path) -> DiskSpace | None:
    """Free and total bytes of the filesystem holding path (None if it cannot be read)."""
    try:
        stats = os.statvfs(path)
    except OSError:
        return None
    return DiskSpace(free=stats.f_bavail * stats.f_frsize, total=stats.f_blocks * stats.f_frsize)


class HostProbe:
    """Offers `slots` CPU devices and samples the rank process running on each."""

    def __init__(self, slots: int, registry: DeviceRegistry) -> None:
        self.slots = slots
        self._registry = registry
        self._processes: dict[int, psutil.Process] = {}
        self._lock = threading.Lock()
        self._memory_total = psutil.virtual_memory().total  # read once: it does not change

    def devices(self) -> list[NodeDevice]:
        """The CPU slots, for registration."""
        return [
            NodeDevice(index=i, kind="cpu", name=f"CPU slot {i}", memory_total=self._memory_total)
            for i in range(self.slots)
        ]

    def sample(self, node: str, now: float) -> list[DeviceSample]:
        """One reading per slot: 0 % and 0 bytes when the slot is idle."""
        with self._lock:
            return [self._read_slot(node, i, now, self._memory_total) for i in range(self.slots)]

    def _read_slot(self, node: str, slot: int, now: float, total: int) -> DeviceSample:
        occupant = self._registry.get(slot)
        util, rss = 0.0, 0
        if occupant is not None:
            try:
                process = self._process(occupant.pid)
                with process.oneshot():
                    util = process.cpu_percent(interval=None)
                    rss = process.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                self._processes.pop(occupant.pid, None)
        return DeviceSample(
            node=node,
            device=slot,
            kind="cpu",
            time=now,
            util=util,
            mem_used=rss,
            mem_total=total,
            temperature=None,
            power=None,
        )

    def _process(self, pid: int) -> psutil.Process:
        """A cached handle, so cpu_percent measures since the previous sample."""
        live = {o.pid for o in self._registry.snapshot().values()}
        for stale in set(self._processes) - live:
            del self._processes[stale]
        if pid not in self._processes:
            self._processes[pid] = psutil.Process(pid)
        return self._processes[pid]
