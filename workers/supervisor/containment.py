"""Every process of one attempt, however it detaches: a cgroup v2 of its own, else its uid.

A rank can leave its process group (setsid after a double fork) and then no signal to the
group reaches it, and PR_SET_PDEATHSIG covers only the rank itself. So each attempt gets
a cgroup v2 of its own where the host offers one (found in /proc/self/mountinfo): the
supervisor moves each rank's orphan guard into it before the guard execs user code
(the guard waits to see itself there), every descendant is born inside, and ending the
attempt is `cgroup.kill` (or killing what `cgroup.procs` lists until it is empty).
Without cgroup v2, where each job has a uid of its own, the attempt's processes are every
process of that uid, killed until none is left. With neither (same-user mode, or one uid
for every job), only the ranks' process group is reachable, as before.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil

from workers.supervisor.job_user import JobIdentity

log = logging.getLogger(__name__)

#: the folder, beside the worker's own cgroup, holding one cgroup per attempt
CGROUP_FOLDER = "trainboard"
#: how often the kill loop looks again for survivors (seconds)
KILL_POLL_SECONDS = 0.02
#: the attempts of this worker per uid: a uid is killed only when its last attempt ends
_uid_holders: dict[int, int] = {}
_uid_lock = threading.Lock()
_warned = threading.Event()  # the host's cgroups could not be used (said once)


class ContainmentError(OSError):
    """A process could not be placed in its attempt's cgroup."""


def cgroup2_mount(mountinfo: str | None = None) -> Path | None:
    """Where the unified (v2) cgroup hierarchy is mounted, if it is."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None
    for line in mountinfo.splitlines():
        fields, _, rest = line.partition(" - ")
        if rest.split(" ", 1)[0] == "cgroup2":
            return Path(fields.split(" ")[4].replace("\\040", " "))
    return None


def cgroup_of(pid: int | str = "self") -> str | None:
    """A process's cgroup v2 path ("0::" line of /proc/PID/cgroup), None if unknown."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    return next((line[3:] for line in lines if line.startswith("0::")), None)


def _worker_tag() -> str:
    """This worker process: pid and start time, so a sweep knows a dead worker's cgroups."""
    return f"w{os.getpid()}.{int(psutil.Process().create_time())}"


def _worker_alive(tag: str) -> bool:
    try:
        pid, started = tag[1:].split(".", 1)
        return int(psutil.Process(int(pid)).create_time()) == int(started)
    except (ValueError, psutil.Error):
        return False


class Containment:
    """The processes of one attempt (or of a step of it): placed, listed, accounted, ended."""

    def __init__(
        self,
        identity: JobIdentity,
        *,
        uid: int | None = None,
        cgroup: Path | None = None,
        relative: str | None = None,
    ) -> None:
        self.identity = identity
        #: the uid whose every process is this attempt's (cgroup-less hosts only)
        self.uid = uid
        self.cgroup = cgroup
        #: the cgroup as /proc/PID/cgroup names it (what the orphan guard waits to see)
        self.relative = relative
        #: a step without a cgroup: the process group its current command leads
        self._leader: int | None = None
        self._parts: list[Containment] = []
        self._lock = threading.Lock()
        #: held while a step starts a command and adopts it: the attempt's end spares a
        #: step's processes by its group, which a process just started is not yet known by
        self._starting = threading.Lock()
        self._ended = threading.Event()
        if cgroup is None and uid is not None:
            with _uid_lock:
                _uid_holders[uid] = _uid_holders.get(uid, 0) + 1

    @classmethod
    def create(cls, name: str, identity: JobIdentity, *, exclusive_uid: bool) -> Containment:
        """An attempt's containment: a new cgroup where possible, else its exclusive uid."""
        cgroup, relative = _make_cgroup(name)
        uid = identity.uid if exclusive_uid and cgroup is None else None
        return cls(identity, uid=uid, cgroup=cgroup, relative=relative)

    @property
    def mechanism(self) -> str:
        """What holds the attempt's processes: a cgroup, the uid, or only the process group."""
        if self.cgroup is not None:
            return f"cgroup {self.relative}"
        return f"uid {self.uid}" if self.uid is not None else "process group only"

    def child(self, name: str) -> Containment:
        """A step of this attempt (its provenance) that is ended on its own; the attempt's
        end lets it finish first (see end_after_steps), its processes stay the attempt's."""
        with self._lock:
            if self._ended.is_set():
                raise ContainmentError(f"the attempt's {self.mechanism} has ended")
            if self.cgroup is None:
                part = Containment(self.identity)  # its command's group; the attempt's uid
            else:
                try:
                    (self.cgroup / name).mkdir()
                except OSError as err:
                    raise ContainmentError(f"cannot make {self.relative}/{name}: {err}") from err
                part = Containment(
                    self.identity, cgroup=self.cgroup / name, relative=f"{self.relative}/{name}"
                )
            self._parts.append(part)
            return part

    @contextlib.contextmanager
    def starting(self) -> Iterator[None]:
        """Start a command of this step and adopt it inside this block (see end_after_steps)."""
        with self._starting:
            yield

    def adopt(self, process: subprocess.Popen[bytes]) -> None:
        """Move a just-started process (its orphan guard, still waiting) into the cgroup; one
        that cannot be moved is killed and reaped before the error rises: it never runs
        user code outside."""
        try:
            self._adopt(process.pid)
        except BaseException:
            process.kill()
            process.communicate()  # reaped, its pipes closed
            raise

    def _adopt(self, pid: int) -> None:
        if self.cgroup is None:
            self._leader = pid  # started with process_group=0: it leads its own group
            return
        try:
            (self.cgroup / "cgroup.procs").write_text(str(pid))
        except OSError as err:
            raise ContainmentError(f"cannot move pid {pid} into {self.relative}: {err}") from err

    def pids(self) -> set[int]:
        """Every live process of the attempt now."""
        if self.cgroup is not None:
            found: set[int] = set()
            for directory, _, _ in os.walk(self.cgroup):
                with contextlib.suppress(OSError, ValueError):
                    text = (Path(directory) / "cgroup.procs").read_text()
                    found.update(int(pid) for pid in text.split())
            return found
        if self.uid is not None:
            return _processes_of(self.uid)
        if self._leader is not None:
            return _group_of(self._leader)
        return set()

    def signal(self, signum: int) -> None:
        """Send signum to every process of the attempt (the ranks' group is signalled apart)."""
        for pid in self.pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signum)

    def kill_now(self, timeout: float = 5.0) -> set[int]:
        """Kill what this (step) holds now, and keep it for the next command."""
        return self._kill(timeout)

    def end_after_steps(self, wait: float, timeout: float = 5.0) -> set[int]:
        """End the attempt: everything but its running steps at once, the steps once they
        end by themselves (at most `wait` seconds later), then whatever is left."""
        with self._lock:
            steps = [part for part in self._parts if not part._ended.is_set()]
        if steps and wait > 0:
            # no step is between starting a command and adopting it while the rest is killed
            with contextlib.ExitStack() as held:
                for step in steps:
                    held.enter_context(step._starting)
                self._kill(timeout, spare=lambda: set().union(*(s.pids() for s in steps)))
            deadline = time.monotonic() + wait
            for step in steps:
                step._ended.wait(max(0.0, deadline - time.monotonic()))
        return self.end(timeout)

    def end(self, timeout: float = 5.0) -> set[int]:
        """Kill every process of the attempt until none is left; return any that survived."""
        with self._lock:
            if self._ended.is_set():
                return set()
            self._ended.set()
        if self.cgroup is None and self.uid is not None:
            with _uid_lock:
                _uid_holders[self.uid] -= 1
                last = _uid_holders[self.uid] == 0
                if last:
                    del _uid_holders[self.uid]
            if not last:  # another attempt of this job on this worker still runs as it
                return set()
        left = self._kill(timeout)
        if left:
            log.error("processes %s of %s survived SIGKILL", sorted(left), self.mechanism)
        self._remove()
        return left

    def _kill(self, timeout: float, *, spare: Callable[[], set[int]] | None = None) -> set[int]:
        deadline = time.monotonic() + timeout
        if self.cgroup is not None and spare is None:
            with contextlib.suppress(OSError):  # cgroup.kill: Linux 5.14 and later
                (self.cgroup / "cgroup.kill").write_text("1")
        while True:
            left = self.pids() - (spare() if spare is not None else set())
            if not left or time.monotonic() >= deadline:
                return left
            for pid in left:  # a process forking while it is killed: its child is next
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(KILL_POLL_SECONDS)

    def _remove(self) -> None:
        if self.cgroup is None:
            return
        for directory, _, _ in sorted(os.walk(self.cgroup), key=lambda d: -len(d[0])):
            with contextlib.suppress(OSError):
                os.rmdir(directory)


def _group_of(leader: int) -> set[int]:
    """Live processes of the process group leader leads."""
    found = set()
    for process in psutil.process_iter(["status"]):
        with contextlib.suppress(OSError):
            if os.getpgid(process.pid) == leader and process.info["status"] != "zombie":
                found.add(process.pid)
    return found


def _processes_of(uid: int) -> set[int]:
    """Live processes whose real, effective or saved uid is uid."""
    found = set()
    for process in psutil.process_iter(["uids", "status"]):
        uids = process.info["uids"]
        if uids is not None and uid in uids and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.add(process.pid)
    return found


def _make_cgroup(name: str) -> tuple[Path | None, str | None]:
    """A new cgroup beside this worker's own; (None, None) where the host offers none."""
    mount, own = cgroup2_mount(), cgroup_of()
    if mount is None or own is None:
        return None, None
    folder = mount / own.lstrip("/") / CGROUP_FOLDER
    try:
        folder.mkdir(exist_ok=True)
        _sweep(folder)
        path = folder / f"{_worker_tag()}-{name}-{secrets.token_hex(4)}"
        path.mkdir()
    except OSError as err:
        if not _warned.is_set():  # once: every attempt of this worker falls back alike
            _warned.set()
            log.warning(
                "cannot make attempt cgroups under %s (%s): an attempt's processes are "
                "those of its job's uid where it has one, else only its ranks' group",
                folder,
                err,
            )
        return None, None
    return path, "/" + str(path.relative_to(mount))


def _sweep(folder: Path) -> None:
    """End the cgroups a dead worker left (it was killed: its attempts' processes live on)."""
    for entry in folder.iterdir():
        tag = entry.name.split("-", 1)[0]
        if entry.is_dir() and tag.startswith("w") and not _worker_alive(tag):
            stale = Containment(JobIdentity(None, None, "stale"), cgroup=entry)
            left = stale.end()
            log.warning("ended a dead worker's cgroup %s (%d left)", entry.name, len(left))
