"""Where a job's files live under a node's data directory (the backend checks paths by it).

<data_dir>/runs/job-<id>/              the job's own (owned by its job user, 0700)
    attempt-<n>/                       a rank's working directory, spec.json, rank-<r>.failure
    checkpoints/attempt-<n>/step-<k>/  each attempt's own; an attempt resumes from an earlier one's
    home/, tmp/                        HOME and TMPDIR of its ranks
<data_dir>/runs/.nodes/<node>          each node's storage marker: its worker's instance id
<data_dir>/logs/job-<id>/attempt-<n>/  rank output as captured by the supervisor (service only)
"""

from __future__ import annotations

from pathlib import Path

RUNS = "runs"
LOGS = "logs"


def job_dir(data_dir: Path, job_id: int) -> Path:
    """Everything a job's ranks write on this node."""
    return data_dir / RUNS / f"job-{job_id}"


def attempt_dir(data_dir: Path, job_id: int, number: int) -> Path:
    """The working directory of one attempt's ranks."""
    return job_dir(data_dir, job_id) / f"attempt-{number}"


def checkpoint_root(data_dir: Path, job_id: int) -> Path:
    """The directory holding a job's checkpoints."""
    return job_dir(data_dir, job_id) / "checkpoints"


def checkpoint_dir(data_dir: Path, job_id: int, number: int) -> Path:
    """Where one attempt writes its checkpoints."""
    return checkpoint_root(data_dir, job_id) / f"attempt-{number}"


def log_dir(data_dir: Path, job_id: int, number: int) -> Path:
    """Where the supervisor keeps one attempt's captured rank output."""
    return data_dir / LOGS / f"job-{job_id}" / f"attempt-{number}"


def storage_marker_dir(data_dir: Path) -> Path:
    """Where nodes leave markers that show which of them share the run root."""
    return data_dir / RUNS / ".nodes"
