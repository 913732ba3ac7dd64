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
from contextlib import ExitStack, contextmanager
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


@dataclass(frozen=True)
class _Candidate:
    step: int
    attempt: int
    name: str
    attempt_fd: int
    path: str


def checkpoints_of(session: Session, *, job: Job, limit: int = MAX_LISTED) -> Listing:
    """The newest `limit` complete checkpoints the job's attempts left on their rank-0 node."""
    with ExitStack() as stack:
        found: list[Checkpoint] = []
        total = 0
        for candidate in sorted(
            _candidates(session, job, stack), key=lambda c: (c.step, c.attempt), reverse=True
        ):
            try:
                step_fd = open_dir_below(candidate.attempt_fd, [candidate.name])
            except UnsafeRunPath:
                continue  # gone, or swapped for a link since the scan
            try:
                metadata = file_stat(step_fd, METADATA_FILE)
                if metadata is None:
                    continue  # not complete (DCP writes .metadata last)
                total += 1
                if len(found) < limit:
                    found.append(_checkpoint(candidate, step_fd, metadata))
            finally:
                os.close(step_fd)
        return Listing(checkpoints=found[::-1], total=total)


@contextmanager
def open_step(session: Session, *, job: Job, step: int) -> Iterator[tuple[Checkpoint, int]]:
    """The job's checkpoint of that step (the newest attempt's, if several saved it) and a
    descriptor of its directory, opened without following a link; CheckpointNotFound if none."""
    name = f"step-{step}"
    with ExitStack() as stack:
        for number, data_dir in reversed(_attempt_dirs(session, job)):
            try:
                step_fd = open_run_dir(data_dir, [*_parts(job.id, number), name])
            except UnsafeRunPath:
                continue
            stack.callback(os.close, step_fd)
            metadata = file_stat(step_fd, METADATA_FILE)
            if metadata is None:
                continue
            path = str(run_layout.checkpoint_dir(Path(data_dir), job.id, number) / name)
            candidate = _Candidate(step, number, name, -1, path)
            yield _checkpoint(candidate, step_fd, metadata), step_fd
            return
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


def _candidates(session: Session, job: Job, stack: ExitStack) -> Iterator[_Candidate]:
    """Every step-<n> directory (by name and entry type) of every attempt: one scan each."""
    for number, data_dir in _attempt_dirs(session, job):
        try:
            attempt_fd = open_run_dir(data_dir, _parts(job.id, number))
        except UnsafeRunPath:
            continue  # none yet, or a link the job put there: nothing of it is listed
        stack.callback(os.close, attempt_fd)
        directory = run_layout.checkpoint_dir(Path(data_dir), job.id, number)
        for name in subdirectories(attempt_fd):
            step = step_of(Path(name)) if len(name) <= MAX_STEP_NAME else None
            if step is not None:
                yield _Candidate(step, number, name, attempt_fd, str(directory / name))


def _checkpoint(candidate: _Candidate, step_fd: int, metadata: os.stat_result) -> Checkpoint:
    return Checkpoint(
        attempt=candidate.attempt,
        step=candidate.step,
        size_bytes=sum(regular_files(step_fd).values()),
        saved_at=datetime.fromtimestamp(metadata.st_mtime, UTC),
        path=candidate.path,
    )
