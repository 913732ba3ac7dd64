"""The device registry's pid → rank tracing, remembered while the slots stay as they are."""

from __future__ import annotations

import os
import subprocess
import sys

from workers.devices.registry import DeviceRegistry, Occupant


def test_a_child_is_traced_to_its_rank_and_forgotten_when_the_slot_changes_hands() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        registry = DeviceRegistry()
        assert registry.owner_of(child.pid) is None  # nobody registered
        rank = Occupant(attempt_id=3, rank=1, pid=os.getpid())
        registry.assign(0, rank)
        assert registry.owner_of(child.pid) == rank  # this process's child: its worker
        assert registry.owner_of(child.pid) == rank  # remembered
        registry.release(0, pid=os.getpid())
        assert registry.owner_of(child.pid) is None
        other = Occupant(attempt_id=4, rank=0, pid=child.pid)
        registry.assign(1, other)
        assert registry.owner_of(child.pid) == other
        assert registry.owner_of(2**22 + 11) is None  # no such process
    finally:
        child.kill()
        child.wait()


def test_a_process_that_left_its_ranks_tree_still_counts_for_its_attempt() -> None:
    ranks = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
    stray = subprocess.Popen(["sleep", "60"])  # no rank's descendant: a setsid daemon's place
    try:
        registry = DeviceRegistry()
        for slot, process in zip((3, 2), ranks, strict=True):
            registry.assign(slot, Occupant(attempt_id=5, rank=slot - 2, pid=process.pid))
        assert registry.owner_of(stray.pid) is None
        assert registry.processes_on(2) == [ranks[1].pid]
        members = {process.pid for process in [*ranks, stray]}
        registry.track(5, lambda: members)
        # the attempt's first slot accounts for it, NVML attributes its memory to rank 0
        assert registry.processes_on(2) == sorted([ranks[1].pid, stray.pid])
        assert registry.processes_on(3) == [ranks[0].pid]
        assert registry.owner_of(stray.pid) == Occupant(5, 0, ranks[1].pid)
        registry.untrack(5)
        assert registry.owner_of(stray.pid) is None
    finally:
        for process in [*ranks, stray]:
            process.kill()
            process.wait()
