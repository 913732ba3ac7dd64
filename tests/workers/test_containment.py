"""An attempt's containment: the cgroup v2 mount found, a forking process killed to the last."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from workers.supervisor import containment
from workers.supervisor.containment import Containment
from workers.supervisor.job_user import JobIdentity
from workers.supervisor.orphan_guard import guarded

HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
UNIFIED = "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
V1_ONLY = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
#: forks a child every few milliseconds, each in a new session, each doing the same
FORKER = """
import os, time
while True:
    if os.fork() == 0:
        os.setsid()
        continue
    time.sleep(0.005)
"""


def test_the_cgroup2_mount_is_read_from_mountinfo() -> None:
    assert containment.cgroup2_mount(HYBRID) == Path("/sys/fs/cgroup/unified")
    assert containment.cgroup2_mount(UNIFIED) == Path("/sys/fs/cgroup")
    assert containment.cgroup2_mount(V1_ONLY) is None


@pytest.mark.slow  # a process that forks without end
@pytest.mark.skipif(
    containment.cgroup2_mount() is None or os.geteuid() != 0,
    reason="needs a cgroup v2 hierarchy this user may write",
)
def test_a_process_forking_new_sessions_is_killed_to_the_last_one() -> None:
    held = Containment.create("forker", JobIdentity(None, None, "me"), exclusive_uid=False)
    assert held.cgroup is not None and held.relative is not None
    process = subprocess.Popen(
        guarded([sys.executable, "-c", FORKER], cgroup=held.relative), process_group=0
    )
    try:
        held.adopt(process)
        deadline = time.monotonic() + 10
        while len(held.pids()) < 20:  # it runs, in the cgroup, and spreads
            assert time.monotonic() < deadline, held.pids()
            time.sleep(0.05)
        seen = held.pids()
        assert held.end() == set()
        process.wait(timeout=5)
        assert not any(_running(pid) for pid in seen)
        assert not held.cgroup.exists()
    finally:
        held.end()
        process.kill()


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
