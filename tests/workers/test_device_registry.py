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
