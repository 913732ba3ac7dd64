"""A job its own policy pauses when a checkpoint finds no space (`checkpoint.on_disk_full`)."""

from __future__ import annotations

import os
from pathlib import Path

from workers.contract.protocol import AttemptOutcome


def free_mb(path: Path) -> int | str:
    """Megabytes (10^6 bytes) free for unprivileged writers on path's filesystem ('?' unknown)."""
    try:
        stats = os.statvfs(path)
    except OSError:
        return "?"
    return stats.f_bavail * stats.f_frsize // 1_000_000


def paused_for_disk(outcome: AttemptOutcome, *, node: str, data_dir: Path) -> AttemptOutcome:
    """The attempt's outcome when its ranks left to pause the job: stopped, naming the disk.

    The reason leads with "no space left on node X (N MB free)", then what the ranks said
    (which checkpoint was lost); the job keeps its last good checkpoint to resume from.
    """
    reason = f"no space left on node {node} ({free_mb(data_dir)} MB free)"
    if outcome.reason:
        reason = f"{reason}: {outcome.reason}"
    update = {"outcome": "stopped", "reason": reason[:4096], "pause": True, "platform_fault": False}
    return outcome.model_copy(update=update)
