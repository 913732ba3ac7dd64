"""The kernel's out-of-memory kills, counted where a supervisor can see them.

A rank the kernel's OOM killer ends dies by SIGKILL and writes nothing: its supervisor would
report "rank 0 was killed by SIGKILL", which the job's OOM rules (health.on_oom) do not read
as out of memory. The kernel counts its kills: per memory cgroup (v1 `memory.oom_control`,
v2 `memory.events`, each an `oom_kill N` line) and for the whole machine (`/proc/vmstat`).
The counters of the cgroups the supervisor and its ranks live in (and their ancestors: a
limit may be the job's, above the step's) are read before the ranks start and again when a
rank dies by SIGKILL that the supervisor did not send; one that moved names where memory ran
out. Under Slurm's task/cgroup that is the step's or the job's cgroup; on a node pool, the
container's or the systemd service's limit, or the machine itself.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from workers.supervisor.containment import cgroup2_mount

#: the counter's line in memory.events (v2), memory.oom_control (v1) and /proc/vmstat
_KILLS = re.compile(r"^oom_kill (\d+)$", re.MULTILINE)
VMSTAT = Path("/proc/vmstat")


def memory_mounts(mountinfo: str) -> tuple[Path | None, Path | None]:
    """Where cgroup v1's memory controller and the unified (v2) hierarchy are mounted (the
    latter as the attempt's containment finds it)."""
    v1 = None
    for line in mountinfo.splitlines():
        fields, _, rest = line.partition(" - ")
        kind, _source, options = (rest.split(" ") + ["", "", ""])[:3]
        if kind == "cgroup" and "memory" in options.split(",") and len(fields.split(" ")) > 4:
            v1 = Path(fields.split(" ")[4].replace("\\040", " "))
            break
    return v1, cgroup2_mount(mountinfo)


def cgroup_dirs(proc_cgroup: str, mountinfo: str) -> list[Path]:
    """The memory cgroup folders a process is in (from its /proc/PID/cgroup), each with its
    ancestors up to the mount, deepest first; only those that count OOM kills."""
    v1, v2 = memory_mounts(mountinfo)
    found: list[Path] = []
    for line in proc_cgroup.splitlines():
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if number == "0" and v2 is not None:
            root, counter = v2, "memory.events"
        elif v1 is not None and "memory" in controllers.split(","):
            root, counter = v1, "memory.oom_control"
        else:
            continue
        folder = root / path.lstrip("/")
        while True:
            if (folder / counter).is_file() and folder not in found:
                found.append(folder)
            if folder == root:
                break
            folder = folder.parent
    return found


def _count(path: Path) -> int | None:
    with contextlib.suppress(OSError):
        found = _KILLS.search(path.read_text())
        return int(found.group(1)) if found else None
    return None


def _counter(folder: Path) -> Path:
    events = folder / "memory.events"
    return events if events.is_file() else folder / "memory.oom_control"


def _limit(folder: Path) -> str | None:
    """The folder's memory limit in words, or None when it has none."""
    for name in ("memory.max", "memory.limit_in_bytes"):
        with contextlib.suppress(OSError, ValueError):
            value = (folder / name).read_text().strip()
            if value == "max" or int(value) >= 1 << 60:  # v1's "unlimited" is near 2**63
                return None
            return f"limit {int(value) / 2**20:.0f} MiB"
    return None


@dataclass
class OomKills:
    """The OOM-kill counters of some cgroups and of the machine, read once at the start."""

    folders: list[Path]
    #: what each counter read at the start (None: unreadable then)
    before: dict[Path, int | None] = field(default_factory=dict)
    machine: int | None = None

    @classmethod
    def watch(cls, pids: list[int | str] | None = None) -> OomKills:
        """Counters of the memory cgroups of these processes (default: this one), read now."""
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            mountinfo = ""
        folders: list[Path] = []
        for pid in pids or ["self"]:
            with contextlib.suppress(OSError):
                for folder in cgroup_dirs(Path(f"/proc/{pid}/cgroup").read_text(), mountinfo):
                    if folder not in folders:
                        folders.append(folder)
        return cls(folders).reset()

    def add(self, folder: Path) -> None:
        """Count in this cgroup too (an attempt's own, made after the start)."""
        if folder not in self.folders and _counter(folder).is_file():
            self.folders.insert(0, folder)
            self.before[folder] = _count(_counter(folder))

    def reset(self) -> OomKills:
        """Read every counter now: later kills are counted from here."""
        self.before = {folder: _count(_counter(folder)) for folder in self.folders}
        self.machine = _count(VMSTAT)
        return self

    def since(self) -> str | None:
        """Where the kernel killed for lack of memory since the start, in words, or None."""
        for index, folder in enumerate(self.folders):  # deepest first
            was, now = self.before.get(folder), _count(_counter(folder))
            if was is not None and now is not None and now > was:
                # the limit is this cgroup's or an ancestor's (Slurm limits the job and the
                # step, not each task): the nearest one is the one that was hit
                limits = (
                    _limit(f) for f in self.folders[index:] if f in folder.parents or f == folder
                )
                limit = next((found for found in limits if found), None)
                return f"memory cgroup {folder}" + (f", {limit}" if limit else "")
        now = _count(VMSTAT)
        if self.machine is not None and now is not None and now > self.machine:
            return f"on this machine: {now - self.machine} kill(s) counted in /proc/vmstat"
        return None


def describe(rank: int, where: str) -> str:
    """The reason of a rank the kernel's OOM killer ended (the prefix OOM rules read)."""
    return f"out of memory: rank {rank} was killed by the kernel's out-of-memory killer ({where})"
