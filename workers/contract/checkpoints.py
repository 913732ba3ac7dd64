"""Where checkpoints live on disk (no torch import: the supervisor uses it too)."""

from __future__ import annotations

import re
from pathlib import Path

_STEP_DIR = re.compile(r"^step-(\d+)$")
#: DCP writes this file last, so a directory holding it is a complete checkpoint
METADATA_FILE = ".metadata"


def checkpoint_path(checkpoint_dir: Path, step: int) -> Path:
    """The directory of the checkpoint taken after `step` optimizer steps."""
    return checkpoint_dir / f"step-{step}"


def step_of(path: Path) -> int | None:
    """The step a checkpoint directory holds, from its name."""
    match = _STEP_DIR.match(path.name)
    return int(match.group(1)) if match else None


def complete_checkpoints(checkpoint_dir: Path) -> list[Path]:
    """Complete checkpoint directories, oldest step first."""
    if not checkpoint_dir.is_dir():
        return []
    found = [
        p
        for p in checkpoint_dir.iterdir()
        if p.is_dir() and step_of(p) is not None and (p / METADATA_FILE).is_file()
    ]
    return sorted(found, key=lambda p: step_of(p) or 0)


def newest_checkpoint(checkpoint_dir: Path) -> Path | None:
    """The complete checkpoint with the highest step, or None."""
    found = complete_checkpoints(checkpoint_dir)
    return found[-1] if found else None
