"""Which checkpoint an attempt's report may name: the trust rule of the attempt lifecycle.

A reported checkpoint counts only when it is a `step-<n>` directory in
`<data_dir>/runs/job-<id>/checkpoints/` of the node that reports it
(workers/contract/run_layout.py, which the supervisor writes by), reached without a link.
A refused path is never resumed from.
"""

from __future__ import annotations

import errno
import logging
import os
import posixpath
import re
from pathlib import Path

from workers.contract.run_files import UnsafeRunPath, open_run_dir
from workers.contract.run_layout import RUNS, checkpoint_root

log = logging.getLogger(__name__)

_STEP_DIR = re.compile(r"^step-\d{1,18}$")
_ATTEMPT_DIR = re.compile(r"^attempt-\d{1,9}$")
MAX_PATH = 4096


def checkpoints_root(data_dir: str, job_id: int) -> str:
    """Where a job's checkpoints lie under a node's data dir."""
    return str(checkpoint_root(Path(posixpath.normpath(data_dir)), job_id))


def refusal(path: str, *, data_dir: str | None, job_id: int) -> str | None:
    """Why a reported checkpoint path is not this job's own; None when it is."""
    if data_dir is None:
        return "the node reported no data dir at registration"
    if len(path) > MAX_PATH or "\x00" in path or not posixpath.isabs(path):
        return "not an absolute path"
    if posixpath.normpath(path) != path or "//" in path:
        return "not a normalized path ('..', '.', or repeated '/')"
    root = checkpoints_root(data_dir, job_id)
    parent, name = posixpath.split(path)
    holder, attempt = posixpath.split(parent)
    # <root>/attempt-<n>/step-<k> (each attempt's own), or <root>/step-<k> from before that
    if parent != root and not (holder == root and _ATTEMPT_DIR.match(attempt)):
        return f"not a step-<n> directory in {root} or one of its attempt-<n> directories"
    if not _STEP_DIR.match(name):
        return f"not a step-<n> directory in {root}"
    if _through_link(data_dir, path):
        return "resolves outside the job's checkpoint dir (a symlink)"
    return None


def accepted_checkpoint(
    path: str | None, *, data_dir: str | None, job_id: int, node: str
) -> str | None:
    """The reported checkpoint if it lies in the job's own checkpoint dir; else None, logged."""
    if not path:
        return None
    why = refusal(path, data_dir=data_dir, job_id=job_id)
    if why is None:
        return path
    log.warning(
        "node %s reported checkpoint %r for job %d: ignored, %s", node, path[:300], job_id, why
    )
    return None


def _through_link(data_dir: str, path: str) -> bool:
    """Whether a component of path below the node's runs root is a link (or not a directory),
    walked by descriptor without following any; a path not there (yet, or on a node whose
    data dir this host does not see) is not refused for that."""
    runs = posixpath.join(posixpath.normpath(data_dir), RUNS)
    try:
        os.close(open_run_dir(data_dir, posixpath.relpath(path, runs).split("/")))
    except UnsafeRunPath as err:
        return err.errno in (errno.ELOOP, errno.ENOTDIR)
    return False
