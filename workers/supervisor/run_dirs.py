"""Making a job's directories safely as root: nothing the job planted is followed.

A job's directory belongs to its job user, who may have replaced any entry in it with
a symlink (to /etc, to the worker's token) during an earlier attempt. Everything here
works on directory file descriptors opened with O_NOFOLLOW, creates files with O_EXCL,
and reads a rank's files only when they are regular files owned by that job.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from workers.contract import run_files, run_layout
from workers.contract.protocol import AttemptOrder
from workers.contract.rank_env import failure_file, signal_file
from workers.supervisor.job_user import JobIdentity

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeRunDir(RuntimeError):
    """An entry of a job's directory is not what Trainboard made (a symlink, a file)."""


@dataclass(frozen=True)
class AttemptDirs:
    """The directories of one attempt on this node."""

    job: Path
    run: Path
    checkpoints: Path
    home: Path
    tmp: Path
    logs: Path


def prepare(data_dir: Path, job_id: int, number: int, identity: JobIdentity) -> AttemptDirs:
    """Create (or check) the job's directories, owned by its job user, mode 0700."""
    data_dir.mkdir(parents=True, exist_ok=True)
    runs = data_dir / run_layout.RUNS
    runs.mkdir(exist_ok=True)
    os.chmod(runs, 0o711)  # ranks traverse it to their own job's directory, list nothing
    job = run_layout.job_dir(data_dir, job_id)
    run = run_layout.attempt_dir(data_dir, job_id, number)
    checkpoints = run_layout.checkpoint_dir(data_dir, job_id, number)
    with _opened(runs) as runs_fd, _own_dir(runs_fd, job.name, identity) as job_fd:
        for name in (run.name, "home", "tmp"):
            with _own_dir(job_fd, name, identity):
                pass
        with (
            _own_dir(job_fd, checkpoints.parent.name, identity) as root_fd,
            _own_dir(root_fd, checkpoints.name, identity),
        ):
            pass
    logs = run_layout.log_dir(data_dir, job_id, number)
    logs.mkdir(parents=True, exist_ok=True)  # service only: the job cannot plant links here
    os.chmod(data_dir / run_layout.LOGS, 0o700)
    return AttemptDirs(job, run, checkpoints, job / "home", job / "tmp", logs)


def prepare_attempt(
    data_dir: Path, order: AttemptOrder, identity: JobIdentity, ranks: Iterable[int]
) -> AttemptDirs:
    """An attempt's directories made, its spec.json written, no stale checkpoint, failure or
    signal mark."""
    dirs = prepare(data_dir, order.job_id, order.number, identity)
    write_file(dirs.run, "spec.json", order.spec.model_dump_json(indent=2))
    # earlier attempts' checkpoints go, except the one this attempt resumes from
    keep = {dirs.checkpoints.name}
    if order.resume_from:
        keep.add(Path(order.resume_from).parent.name)
    prune_checkpoints(dirs.checkpoints.parent, keep=keep)
    for rank in ranks:
        remove_file(dirs.run, failure_file(dirs.run, rank).name)
        remove_file(dirs.run, signal_file(dirs.run, rank).name)
    return dirs


def prune_steps(directory: Path, *, keep_last: int) -> None:
    """Delete all but the newest `keep_last` step-<k> checkpoints of one attempt's dir."""
    with contextlib.suppress(UnsafeRunDir), _opened(directory) as dir_fd:
        steps = sorted(
            (int(name[5:]), name)
            for name in os.listdir(dir_fd)
            if name.startswith("step-") and name[5:].isdigit()
        )
        for _, name in steps[:-keep_last] if keep_last > 0 else []:
            shutil.rmtree(name, dir_fd=dir_fd, ignore_errors=True)


def prune_checkpoints(root: Path, *, keep: set[str]) -> None:
    """Delete earlier attempts' checkpoint dirs under root except those named in keep.

    Works on a directory fd opened without following links, so nothing the job planted
    can turn the deletion elsewhere.
    """
    with contextlib.suppress(UnsafeRunDir), _opened(root) as root_fd:
        for name in os.listdir(root_fd):
            if name.startswith("attempt-") and name not in keep:
                shutil.rmtree(name, dir_fd=root_fd, ignore_errors=True)


def write_file(directory: Path, name: str, text: str) -> None:
    """Write a fresh read-only file in a job's directory (a planted entry is replaced).

    Written under a name of its own, then renamed over `name`: the rename replaces a
    planted symlink itself, never its target, and the supervisors of a multi-node attempt
    on one shared run root may write the same file at the same instant.
    """
    with _opened(directory) as dir_fd:
        partial = f".{name}.{secrets.token_hex(8)}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(partial, flags, 0o444, dir_fd=dir_fd)
        os.fchmod(fd, 0o444)  # whatever the umask: the job user (its directory's owner) reads it
        with os.fdopen(fd, "w") as file:
            file.write(text)
        os.replace(partial, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def remove_file(directory: Path, name: str) -> None:
    """Remove an entry of a job's directory if present (a symlink is removed, not followed)."""
    with _opened(directory) as dir_fd, contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)


def read_job_file(path: Path, identity: JobIdentity, limit: int = 4096) -> str | None:
    """A rank's file (runs/job-<id>/attempt-<n>/<name>), if it is a regular file the job owns;
    None otherwise. Opened from the job dir down (whose name, in the root-owned runs dir, the
    job cannot swap), no component followed: the job may swap attempt-<n> for a link."""
    try:
        with _opened(path.parent.parent) as job_fd:
            dir_fd = run_files.open_dir_below(job_fd, [path.parent.name])
        try:
            fd = run_files.open_file(dir_fd, path.name)
        finally:
            os.close(dir_fd)
    except (OSError, UnsafeRunDir):
        return None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        owner = os.getuid() if identity.uid is None else identity.uid
        if not stat.S_ISREG(info.st_mode) or info.st_uid != owner:
            return None
        return file.read(limit).decode(errors="replace")


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[int]:
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError as err:
        raise UnsafeRunDir(f"{path} is not a plain directory: {err}") from err
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _own_dir(parent_fd: int, name: str, identity: JobIdentity) -> Iterator[int]:
    """An entry of parent made or checked as a directory owned by the job, mode 0700."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o700, dir_fd=parent_fd)
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as err:
        raise UnsafeRunDir(f"{name} in a job's directory is not a plain directory") from err
    try:
        if identity.uid is not None:
            os.fchown(fd, identity.uid, identity.gid if identity.gid is not None else -1)
        os.fchmod(fd, 0o700)
        yield fd
    finally:
        os.close(fd)
