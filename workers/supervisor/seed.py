"""A clone's first checkpoint: another job's, copied into this job's own directory as root.

A job cloned "from step N" resumes from its parent's checkpoint, which lies in the
parent's directory (another job user's, mode 0700): its ranks cannot read it, and must
not read anything else of the parent's. The supervisor copies that one step directory,
regular files only, every path component opened without following links (the parent's
ranks wrote those directories), into `checkpoints/seed/step-N` owned by this job.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from workers.contract import run_files, run_layout
from workers.contract.protocol import AttemptOrder
from workers.supervisor.job_user import JobIdentity
from workers.supervisor.run_dirs import UnsafeRunDir, _own_dir  # the same no-follow making

SEED_DIR = "seed"
_SOURCE = re.compile(r"^job-(\d{1,18})/checkpoints/attempt-\d{1,9}/step-\d{1,18}$")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def adopt(order: AttemptOrder, data_dir: Path, identity: JobIdentity) -> AttemptOrder:
    """The order as its ranks should see it: a resume from another job's checkpoint becomes
    a resume from this job's copy of it (made now); anything else is left as it is."""
    if not order.resume_from:
        return order
    source = Path(os.path.normpath(order.resume_from))
    runs = data_dir / run_layout.RUNS
    own = run_layout.checkpoint_root(data_dir, order.job_id)
    if source.is_relative_to(own):
        return order
    relative = str(source.relative_to(runs)) if source.is_relative_to(runs) else ""
    match = _SOURCE.match(relative)
    if match is None or int(match.group(1)) == order.job_id:
        raise UnsafeRunDir(
            f"will not resume from {order.resume_from[:300]}: not a job's checkpoint"
        )
    copy = own / SEED_DIR / source.name
    source_fd = _open_below(runs, relative.split("/"))
    try:
        root_fd = _open_below(runs, [f"job-{order.job_id}", "checkpoints"])
        try:
            shutil.rmtree(SEED_DIR, dir_fd=root_fd, ignore_errors=True)
            with (
                _own_dir(root_fd, SEED_DIR, identity) as seed_fd,
                _own_dir(seed_fd, source.name, identity) as step_fd,
            ):
                _copy_files(source_fd, step_fd, identity)
        finally:
            os.close(root_fd)
    finally:
        os.close(source_fd)
    return order.model_copy(update={"resume_from": str(copy)})


def _open_below(top: Path, parts: list[str]) -> int:
    """A directory fd for top/parts..., no component a link."""
    try:
        top_fd = os.open(top, _DIR_FLAGS)
    except OSError as err:
        raise UnsafeRunDir(f"{top} is not a plain directory: {err}") from err
    try:
        return run_files.open_dir_below(top_fd, parts)
    except OSError as err:
        raise UnsafeRunDir(f"{'/'.join(parts)} is not a plain directory: {err}") from err
    finally:
        os.close(top_fd)


def _copy_files(source_fd: int, target_fd: int, identity: JobIdentity) -> None:
    for name in os.listdir(source_fd):
        try:
            src = run_files.open_file(source_fd, name)
        except OSError:
            continue  # a link, or not a regular file: not part of the checkpoint
        with os.fdopen(src, "rb") as reader:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            dst = os.open(name, flags, 0o600, dir_fd=target_fd)
            if identity.uid is not None:
                os.fchown(dst, identity.uid, identity.gid if identity.gid is not None else -1)
            with os.fdopen(dst, "wb") as writer:
                shutil.copyfileobj(reader, writer, 1 << 20)
