"""The kernel's OOM-kill counters a supervisor reads (workers/supervisor/oom_kills.py), on
cgroup folders laid out as the kernel shows them (v1 memory controller, v2 unified) and
/proc texts recorded on this machine and under Slurm's task/cgroup. The real kill, by the
kernel inside a Slurm step's cgroup: tests/executors/test_slurm_cgroup_memory.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.supervisor import oom_kills
from workers.supervisor.oom_kills import OomKills, cgroup_dirs, describe, memory_mounts

#: /proc/self/mountinfo lines of this machine (cgroup v1 controllers and a v2 "unified")
MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
#: /proc/PID/cgroup of a Slurm step's task under task/cgroup (cgroup/v1)
SLURM_TASK = """\
9:name=systemd:/
4:memory:/slurm_vm/uid_0/job_7/step_0/task_0
1:cpu:/
0::/
"""


def test_mounts_of_the_memory_controller_and_the_unified_hierarchy() -> None:
    assert memory_mounts(MOUNTINFO) == (
        Path("/sys/fs/cgroup/memory"),
        Path("/sys/fs/cgroup/unified"),
    )
    assert memory_mounts("") == (None, None)


def _mounted(tmp_path: Path) -> str:
    return MOUNTINFO.replace("/sys/fs/cgroup", str(tmp_path))


def _v1(folder: Path, kills: int, limit: int | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "memory.oom_control").write_text(
        f"oom_kill_disable 0\nunder_oom 0\noom_kill {kills}\n"
    )
    (folder / "memory.limit_in_bytes").write_text(f"{limit if limit else 9223372036854771712}\n")
    return folder


def test_a_task_counts_in_its_own_cgroup_and_every_ancestor_deepest_first(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    chain = [root, *(root / p for p in ("slurm_vm", "slurm_vm/uid_0", "slurm_vm/uid_0/job_7"))]
    for folder in chain:
        _v1(folder, 0)
    step = _v1(root / "slurm_vm/uid_0/job_7/step_0", 0)
    task = _v1(step / "task_0", 0)
    assert cgroup_dirs(SLURM_TASK, _mounted(tmp_path)) == [task, step, *reversed(chain)]


@pytest.fixture
def vmstat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The machine's counter, as /proc/vmstat shows it (5 kills so far)."""
    path = tmp_path / "vmstat"
    path.write_text("pgfault 1\noom_kill 5\n")
    monkeypatch.setattr(oom_kills, "VMSTAT", path)
    return path


def test_a_kill_names_the_cgroup_that_counted_it_and_the_nearest_limit(
    tmp_path: Path, vmstat: Path
) -> None:
    job = _v1(tmp_path / "memory/slurm_vm/uid_0/job_7", 0)
    step = _v1(job / "step_0", 0, limit=1000 * 2**20)
    task = _v1(step / "task_0", 0)
    kills = OomKills([task, step, job]).reset()
    assert kills.since() is None
    _v1(task, 1)  # the kernel killed a process of the task: the limit hit is the step's
    vmstat.write_text("pgfault 1\noom_kill 6\n")
    where = kills.since()
    assert where == f"memory cgroup {task}, limit 1000 MiB"
    assert describe(0, where).startswith("out of memory: rank 0 was killed by the kernel's")


def test_a_v2_cgroup_counts_in_memory_events_and_says_max_for_no_limit(tmp_path: Path) -> None:
    folder = tmp_path / "unified/trainboard/a1"
    folder.mkdir(parents=True)
    (folder / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\n")
    (folder / "memory.max").write_text("max\n")
    kills = OomKills([]).reset()
    kills.add(folder)
    (folder / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\n")
    assert kills.since() == f"memory cgroup {folder}"


def test_a_host_oom_without_a_cgroup_limit_is_counted_by_the_machine(vmstat: Path) -> None:
    kills = OomKills([]).reset()
    vmstat.write_text("oom_kill 6\n")
    assert kills.since() == "on this machine: 1 kill(s) counted in /proc/vmstat"


def test_unreadable_counters_say_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oom_kills, "VMSTAT", tmp_path / "missing")
    kills = OomKills([tmp_path / "gone"]).reset()
    assert kills.since() is None


def test_this_process_is_watched_in_the_memory_cgroups_the_machine_mounts() -> None:
    """On the real /proc and /sys: the folders found are this process's memory cgroup and
    its ancestors, each with its counter."""
    v1, v2 = memory_mounts(Path("/proc/self/mountinfo").read_text())
    kills = OomKills.watch()
    if v1 is None and (v2 is None or not (v2 / "memory.events").exists()):
        assert kills.folders == []
        return
    assert kills.folders, "a memory cgroup is mounted, and this process is in one"
    mounts = [m for m in (v1, v2) if m is not None]
    for folder in kills.folders:
        assert any(folder == m or m in folder.parents for m in mounts), folder
        assert kills.before[folder] is not None, folder
