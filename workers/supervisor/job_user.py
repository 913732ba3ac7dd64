"""Who a job's ranks run as: an unprivileged OS user, one uid per job, never the worker's.

A worker running as root creates (or uses) the job account `TRAINBOARD_JOB_USER` and
starts each job's ranks as a uid of the job's own (from `job_uid_base` up, leased from the
host-wide registry in uid_leases, so two deployments on one host never share one) in that
account's group, so a job can read neither the worker's files and environment nor another
job's run directory. A worker that cannot switch users (an unprivileged person's laptop) runs
ranks as itself, only where that was allowed, and says once that jobs are not isolated.
"""

from __future__ import annotations

import contextlib
import grp
import logging
import os
import pwd
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from workers.contract import run_layout
from workers.supervisor.uid_leases import DEFAULT_DIRECTORY, UidExhausted, UidRegistry

log = logging.getLogger(__name__)

#: the highest uid a job may get (uids at 2^31 and above confuse tools that read them signed)
MAX_JOB_UID = 2**31 - 2
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class IsolationError(RuntimeError):
    """Ranks cannot be confined here, and running them unconfined was not allowed."""


@dataclass(frozen=True)
class JobIdentity:
    """The uid and gid one job's ranks run as; None for both means the worker's own."""

    uid: int | None
    gid: int | None
    name: str

    @property
    def switches(self) -> bool:
        """Whether ranks run as another user than the worker."""
        return self.uid is not None


@dataclass(frozen=True)
class Isolation:
    """How this node confines ranks: the job account, or nothing (same user)."""

    account: str | None
    gid: int = -1
    account_uid: int = -1
    uid_base: int = 0
    #: where job uids are leased, shared by every Trainboard on this host
    uid_registry: Path = DEFAULT_DIRECTORY

    @property
    def per_job(self) -> bool:
        """Whether each job has a uid of its own (so all processes of that uid are the job's)."""
        return self.account is not None and self.uid_base != 0

    def identity(self, job_id: int, *, deployment: str = "", data_dir: Path) -> JobIdentity:
        """The identity of one job's ranks (the same for every attempt of it on this host).

        deployment: the deployment's id; without one, the data dir stands for it.
        """
        if self.account is None:
            return JobIdentity(uid=None, gid=None, name=pwd.getpwuid(os.getuid()).pw_name)
        if self.uid_base == 0:  # one uid for every job: jobs are not isolated from each other
            return JobIdentity(uid=self.account_uid, gid=self.gid, name=self.account)
        registry = UidRegistry(self.uid_registry, self.uid_base, MAX_JOB_UID)
        data_dir = data_dir.resolve()
        owner = deployment or f"data-dir:{data_dir}"
        try:
            uid = registry.uid_for(owner, job_id, job_dir=run_layout.job_dir(data_dir, job_id))
        except (UidExhausted, OSError) as err:
            raise IsolationError(f"no uid for job {job_id}: {err}") from err
        return JobIdentity(uid=uid, gid=self.gid, name=f"{self.account}-{job_id}")


def same_user() -> Isolation:
    """No confinement: ranks run as the worker's own user."""
    return Isolation(account=None)


def prepare_isolation(
    *,
    account: str,
    uid_base: int,
    allow_same_user: bool,
    runs_dir: Path,
    uid_registry: Path = DEFAULT_DIRECTORY,
) -> Isolation:
    """Set up the job account when root; else same-user mode if allowed. Says what it chose."""
    if os.geteuid() != 0:
        message = (
            f"this worker runs as {pwd.getpwuid(os.geteuid()).pw_name} (not root) and cannot "
            "switch users: jobs run as that user and are NOT isolated from this worker's "
            "files, environment or other jobs"
        )
        if not allow_same_user:
            raise IsolationError(
                message + ". Run the worker as root (it starts ranks as the unprivileged "
                "TRAINBOARD_JOB_USER), or accept this with TRAINBOARD_ALLOW_SAME_USER=1"
            )
        log.warning(message)
        print(f"WARNING: {message}", file=sys.stderr, flush=True)
        return same_user()
    entry = _account(account)
    isolation = Isolation(
        account=account,
        gid=entry.pw_gid,
        account_uid=entry.pw_uid,
        uid_base=uid_base,
        uid_registry=uid_registry,
    )
    # uid_base itself is no job's: candidates start above it
    probe_uid = uid_base or entry.pw_uid
    _probe(JobIdentity(uid=probe_uid, gid=entry.pw_gid, name=account), runs_dir)
    how = (
        f"uids from {uid_base} leased in {uid_registry}"
        if uid_base
        else f"uid {entry.pw_uid} for every job"
    )
    log.info("ranks run as job user %s (%s, gid %d)", account, how, entry.pw_gid)
    return isolation


def _account(name: str) -> pwd.struct_passwd:
    """The job account, created (system user, no home, no shell) if it does not exist."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    command = ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin"]
    try:
        grp.getgrnam(name)
        command += ["--gid", name]
    except KeyError:
        command += ["--user-group"]
    done = subprocess.run([*command, name], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        with contextlib.suppress(KeyError):  # another process created it meanwhile
            return pwd.getpwnam(name)
        raise IsolationError(f"cannot create job user {name}: {done.stderr.strip()}")
    log.info("created job user %s", name)
    return pwd.getpwnam(name)


#: run as the job user: can it start this interpreter, import the rank code, reach runs/?
_PROBE = "import os, sys, workers.rank.sdk; os.stat(sys.argv[1])"


def _probe(identity: JobIdentity, runs_dir: Path) -> None:
    runs_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(runs_dir, 0o711)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(runs_dir)],
            user=identity.uid,
            group=identity.gid,
            extra_groups=[],
            env={"PYTHONPATH": _PACKAGE_ROOT, "PATH": "/usr/bin:/bin"},
            cwd="/",
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except OSError as err:
        raise IsolationError(f"cannot start a process as uid {identity.uid}: {err}") from err
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise IsolationError(
            f"the job user (uid {identity.uid}) cannot run {sys.executable} with Trainboard's "
            f"rank code or reach {runs_dir}: {lines[-1] if lines else done.returncode}. "
            "Every directory above the interpreter, the checkout and the data dir must be "
            "traversable by other users (chmod o+x), and the interpreter must not live under "
            "a private home (a venv made from /usr/bin/python3 works)"
        )
