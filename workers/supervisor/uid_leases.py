"""Job uids leased from a registry every Trainboard on the host shares: no two jobs meet.

`uid = base + job id` gave job 1 of every deployment on a host the same uid, so one
deployment's job read and wrote another's files. Here a job's uid is leased from a
root-owned 0700 directory (default /var/lib/trainboard/uids): one file per leased uid
(`uid-<N>`, holding the deployment id, the job id and the job's run directory) and one
per job (`job-<hash of deployment and job id>`, naming its uid), both written under an
exclusive lock on the directory. The same job asking again (a later attempt, a resume)
gets the same uid back, so its files stay its own.

A candidate uid is refused while another job holds its lease, while any process runs
as it (real, effective or saved uid), or while /etc/passwd names it. A lease lasts as
long as its job's run directory exists on this host (files owned by the uid live there);
once that directory is gone and no process runs as the uid, the next allocation that
meets it takes it over (a lease taken in the last ten minutes is live regardless: the
directory is made just after it). The first candidate is `base + job id` (the uid an install made
before leases gave the job, so its files stay its own), then uids drawn from a hash.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pwd
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

#: how many candidate uids an allocation tries before it gives up
MAX_TRIES = 64
#: a lease whose job dir is missing is still live this long after it was last taken
#: (the job's directory is made just after the lease)
FRESH_SECONDS = 600.0
DEFAULT_DIRECTORY = Path("/var/lib/trainboard/uids")


class UidExhausted(RuntimeError):
    """No free uid was found for a job."""


@dataclass(frozen=True)
class Lease:
    """Who holds one uid on this host."""

    deployment: str
    job_id: int
    job_dir: str

    @property
    def key(self) -> tuple[str, int]:
        """The job the lease is for."""
        return self.deployment, self.job_id


@dataclass(frozen=True)
class UidRegistry:
    """The host-wide uid registry: uids in [base, highest] leased to (deployment, job)."""

    directory: Path
    base: int
    highest: int

    def uid_for(self, deployment: str, job_id: int, *, job_dir: Path) -> int:
        """The job's uid on this host: its lease, or a new one on a free uid."""
        wanted = Lease(deployment, job_id, str(job_dir))
        with self._locked():
            key = self.directory / f"job-{_key(deployment, job_id)}"
            held = _read_int(key)
            lease = self._lease(held) if held is not None else None
            if held is not None and lease is not None and lease.key == wanted.key:
                os.utime(self.directory / f"uid-{held}")  # taken again: fresh
                return held
            busy = _uids_running()
            for uid in self._candidates(deployment, job_id):
                if self._free(uid, busy):
                    self._write(self.directory / f"uid-{uid}", json.dumps(wanted.__dict__))
                    self._write(key, str(uid))
                    return uid
        raise UidExhausted(
            f"no free uid for job {job_id} of deployment {deployment!r} after {MAX_TRIES} "
            f"tries in {self.base}..{self.highest} (registry {self.directory})"
        )

    def holder(self, uid: int) -> Lease | None:
        """The lease on uid, if any."""
        return self._lease(uid)

    def _candidates(self, deployment: str, job_id: int) -> Iterator[int]:
        span = self.highest - self.base
        if self.base + job_id <= self.highest:
            yield self.base + job_id
        for attempt in range(1, MAX_TRIES):
            digest = hashlib.sha256(f"{deployment}\0{job_id}\0{attempt}".encode()).digest()
            yield self.base + 1 + int.from_bytes(digest[:8], "big") % span

    def _free(self, uid: int, busy: set[int]) -> bool:
        """No lease (or a stale one), no process, no passwd entry: uid can be given out."""
        if uid in busy:
            return False
        with contextlib.suppress(KeyError):
            pwd.getpwuid(uid)
            return False
        lease = self._lease(uid)
        if lease is None:
            return not (self.directory / f"uid-{uid}").exists()
        if Path(lease.job_dir).exists():
            return False  # its job's files are still owned by it
        with contextlib.suppress(FileNotFoundError):
            if time.time() - os.stat(self.directory / f"uid-{uid}").st_mtime < FRESH_SECONDS:
                return False  # just taken: its job's directory is being made
        # stale: its job's files are gone and nothing runs as it; forget the old holder
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.directory / f"job-{_key(lease.deployment, lease.job_id)}")
        return True

    def _lease(self, uid: int) -> Lease | None:
        try:
            data = json.loads((self.directory / f"uid-{uid}").read_text())
            return Lease(str(data["deployment"]), int(data["job_id"]), str(data["job_dir"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _write(self, path: Path, text: str) -> None:
        partial = path.with_name(f".{path.name}.partial")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(self.directory)
        if info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise PermissionError(
                f"the uid registry {self.directory} must be a directory of this user, "
                f"mode 0700 (it is {oct(info.st_mode & 0o777)}, owner uid {info.st_uid})"
            )
        fd = os.open(self.directory / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def _key(deployment: str, job_id: int) -> str:
    return hashlib.sha256(f"{deployment}\0{job_id}".encode()).hexdigest()[:32]


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


def _uids_running() -> set[int]:
    """Every uid some live process holds (real, effective or saved)."""
    busy: set[int] = set()
    for process in psutil.process_iter(["uids"]):
        uids = process.info["uids"]
        if uids is not None:
            busy.update(uids)
    return busy
