"""CPU slots of a GPU-less machine: each slot reports its rank's CPU % and RSS.

A rank's use is that of every process it started (its descendants, and on the attempt's
first slot whatever of the attempt left its tree, such as a daemon in its own session).
"""

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
        self._seen: set[int] = set()  # pids read during the current sample
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
            samples = [self._read_slot(node, i, now, self._memory_total) for i in range(self.slots)]
            for gone in set(self._processes) - self._seen:
                del self._processes[gone]
            self._seen = set()
            return samples

    def _read_slot(self, node: str, slot: int, now: float, total: int) -> DeviceSample:
        util, rss = 0.0, 0
        for pid in self._registry.processes_on(slot):  # the rank and all it started
            self._seen.add(pid)
            try:
                process = self._process(pid)
                with process.oneshot():
                    util += process.cpu_percent(interval=None)
                    rss += process.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                self._processes.pop(pid, None)
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
        handle = self._processes.get(pid)
        if handle is None or not handle.is_running():  # new, or its pid was reused
            handle = self._processes[pid] = psutil.Process(pid)
        return handle
