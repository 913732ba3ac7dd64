"""Finding a job's checkpoints on its nodes' data dirs (as the control plane sees them).

The directories are written by the job's ranks (untrusted), which may swap any of them for
a symlink at any moment: every directory is opened relative to the one above it, from the
node's runs root down, never following a link (workers/contract/run_files.py), and what is
listed or read is read from those descriptors. A step directory that is, or lies under, a
link is neither listed nor read; sizes count regular files only. A listing shows the newest
`MAX_LISTED` checkpoints and counts the rest: its cost is one scan of each attempt's
checkpoint dir plus one small check per step directory, not a walk of every checkpoint.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.auth.service import Principal
from backend.jobs.models import Attempt, AttemptSlice, Job
from backend.jobs.service import JobNotFound
from backend.nodes.models import Node
from workers.contract import run_layout
from workers.contract.checkpoints import METADATA_FILE, step_of
from workers.contract.run_files import (
    UnsafeRunPath,
    file_stat,
    open_dir_below,
    open_run_dir,
    regular_files,
    run_dir,
    subdirectories,
)
from workers.contract.run_layout import RUNS

#: a listing shows this many checkpoints, the newest; the others are counted
MAX_LISTED = 100
#: `step-` and at most 18 digits (the API's step bound is 10**15)
MAX_STEP_NAME = 23


class CheckpointNotFound(LookupError):
    pass


@dataclass(frozen=True)
class Checkpoint:
    attempt: int
    step: int
    size_bytes: int
    saved_at: datetime
    path: str


@dataclass(frozen=True)
class Listing:
    """The newest checkpoints (oldest step first) and how many complete ones there are."""

    checkpoints: list[Checkpoint]
    total: int


def checkpoints_of(session: Session, *, job: Job, limit: int = MAX_LISTED) -> Listing:
    """The newest `limit` complete checkpoints the job's attempts left on their rank-0 node."""
    complete = sorted(_complete(session, job), reverse=True)  # (step, attempt, data dir)
    found = []
    for step, number, data_dir in complete[:limit]:
        try:
            with run_dir(data_dir, [*_parts(job.id, number), f"step-{step}"]) as step_fd:
                found.append(_checkpoint(job.id, number, data_dir, step, step_fd))
        except (UnsafeRunPath, _Incomplete):
            continue  # swapped for a link (or gone) since the scan: not listed
    return Listing(checkpoints=found[::-1], total=len(complete))


@contextmanager
def open_step(session: Session, *, job: Job, step: int) -> Iterator[tuple[Checkpoint, int]]:
    """The job's checkpoint of that step (the newest attempt's, if several saved it) and a
    descriptor of its directory, opened without following a link; CheckpointNotFound if none."""
    for number, data_dir in reversed(_attempt_dirs(session, job)):
        try:
            step_fd = open_run_dir(data_dir, [*_parts(job.id, number), f"step-{step}"])
        except UnsafeRunPath:
            continue  # not there, or a link: not this attempt's
        try:
            try:
                checkpoint = _checkpoint(job.id, number, data_dir, step, step_fd)
            except _Incomplete:
                continue
            yield checkpoint, step_fd  # outside the handlers: the caller's errors are its own
            return
        finally:
            os.close(step_fd)
    raise CheckpointNotFound(f"job {job.id} has no checkpoint at step {step}")


def at_step(session: Session, *, job: Job, step: int) -> Checkpoint:
    """The job's checkpoint of that step (the newest attempt's, if several saved it)."""
    with open_step(session, job=job, step=step) as (checkpoint, _):
        return checkpoint


def owned_job(session: Session, *, principal: Principal, job_id: int) -> Job:
    """The job if the caller owns it (admins included: a checkpoint is its owner's data);
    JobNotFound, word for word like a missing job, otherwise."""
    job = session.get(Job, job_id)
    if job is None or job.owner_id != principal.user_id:
        raise JobNotFound(f"job {job_id} not found")
    return job


def _attempt_dirs(session: Session, job: Job) -> list[tuple[int, str]]:
    """(attempt number, rank-0 node's data dir) of each attempt, oldest first."""
    rows = session.execute(
        select(Attempt.number, Node.data_dir)
        .join(AttemptSlice, AttemptSlice.attempt_id == Attempt.id)
        .join(Node, Node.name == AttemptSlice.node_name)
        .where(Attempt.job_id == job.id, AttemptSlice.node_rank == 0)
        .order_by(Attempt.number)
    ).all()
    return [(number, data_dir) for number, data_dir in rows if data_dir is not None]


def _parts(job_id: int, number: int) -> list[str]:
    """An attempt's checkpoint dir below the runs root, component by component."""
    top = Path("/")
    return list(run_layout.checkpoint_dir(top, job_id, number).relative_to(top / RUNS).parts)


def _complete(session: Session, job: Job) -> Iterator[tuple[int, int, str]]:
    """(step, attempt, data dir) of every complete checkpoint: one scan of each attempt's
    checkpoint dir (one open at a time), and per step dir an open and a stat of .metadata."""
    for number, data_dir in _attempt_dirs(session, job):
        try:
            with run_dir(data_dir, _parts(job.id, number)) as attempt_fd:
                for name in subdirectories(attempt_fd):
                    step = step_of(Path(name)) if len(name) <= MAX_STEP_NAME else None
                    if (
                        step is not None
                        and name == f"step-{step}"
                        and _is_complete(attempt_fd, name)
                    ):
                        yield step, number, data_dir
        except UnsafeRunPath:
            continue  # none yet, or a link the job put there: nothing of it is listed


def _is_complete(attempt_fd: int, name: str) -> bool:
    try:
        step_fd = open_dir_below(attempt_fd, [name])
    except UnsafeRunPath:
        return False
    try:
        return file_stat(step_fd, METADATA_FILE) is not None  # DCP writes it last
    finally:
        os.close(step_fd)


class _Incomplete(LookupError):
    """A step directory without its .metadata."""


def _checkpoint(job_id: int, number: int, data_dir: str, step: int, step_fd: int) -> Checkpoint:
    """The checkpoint whose directory step_fd is; _Incomplete if it has no .metadata."""
    metadata = file_stat(step_fd, METADATA_FILE)
    if metadata is None:
        raise _Incomplete(f"step-{step}")
    return Checkpoint(
        attempt=number,
        step=step,
        size_bytes=sum(regular_files(step_fd).values()),
        saved_at=datetime.fromtimestamp(metadata.st_mtime, UTC),
        path=str(run_layout.checkpoint_dir(Path(data_dir), job_id, number) / f"step-{step}"),
    )
