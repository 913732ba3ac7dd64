"""Finding a job's checkpoints on its nodes' data dirs (as the control plane sees them).

The directories are written by the job's ranks (untrusted): a step directory counts only
if it lies, without a symlink leaving it, in the job's own checkpoint dir (the rule of
`backend.nodes.trust.refusal`), and sizes count regular files only, never followed links.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.auth.service import Principal
from backend.jobs.models import Attempt, AttemptSlice, Job
from backend.jobs.service import JobNotFound
from backend.nodes.models import Node
from backend.nodes.trust import refusal
from workers.contract import run_layout
from workers.contract.checkpoints import METADATA_FILE, complete_checkpoints, step_of


class CheckpointNotFound(LookupError):
    pass


@dataclass(frozen=True)
class Checkpoint:
    attempt: int
    step: int
    size_bytes: int
    saved_at: datetime
    path: str


def checkpoints_of(session: Session, *, job: Job) -> list[Checkpoint]:
    """Every complete checkpoint the job's attempts left on their rank-0 node, by step."""
    rows = session.execute(
        select(Attempt.number, Node.data_dir)
        .join(AttemptSlice, AttemptSlice.attempt_id == Attempt.id)
        .join(Node, Node.name == AttemptSlice.node_name)
        .where(Attempt.job_id == job.id, AttemptSlice.node_rank == 0)
        .order_by(Attempt.number)
    ).all()
    found = []
    for number, data_dir in rows:
        if data_dir is None:
            continue
        directory = run_layout.checkpoint_dir(Path(data_dir), job.id, number)
        for path in complete_checkpoints(directory):
            if refusal(str(path), data_dir=data_dir, job_id=job.id) or path.is_symlink():
                continue
            metadata = os.lstat(path / METADATA_FILE)
            found.append(
                Checkpoint(
                    attempt=number,
                    step=step_of(path) or 0,
                    size_bytes=_size(path),
                    saved_at=datetime.fromtimestamp(metadata.st_mtime, UTC),
                    path=str(path),
                )
            )
    return sorted(found, key=lambda c: (c.step, c.attempt))


def at_step(session: Session, *, job: Job, step: int) -> Checkpoint:
    """The job's checkpoint of that step (the newest attempt's, if several saved it)."""
    matches = [c for c in checkpoints_of(session, job=job) if c.step == step]
    if not matches:
        raise CheckpointNotFound(f"job {job.id} has no checkpoint at step {step}")
    return matches[-1]


def owned_job(session: Session, *, principal: Principal, job_id: int) -> Job:
    """The job if the caller owns it (admins included: a checkpoint is its owner's data);
    JobNotFound, word for word like a missing job, otherwise."""
    job = session.get(Job, job_id)
    if job is None or job.owner_id != principal.user_id:
        raise JobNotFound(f"job {job_id} not found")
    return job


def _size(path: Path) -> int:
    """Bytes of the regular files directly in a checkpoint directory (links not followed)."""
    total = 0
    with os.scandir(path) as entries:
        for entry in entries:
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
    return total
