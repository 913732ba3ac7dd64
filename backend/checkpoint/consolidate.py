"""One checkpoint (DCP shards, JSON metadata) as one torch.save file of the model's weights.

Built by the control plane, never by the job: the step directory (which the job's ranks
wrote, and might have filled with links) is first copied into a private directory,
regular files only, opened without following links and capped in size; the copy is read
with the engine's pickle-free reader in a child process (time-bounded), which saves the
model's tensors with torch.save: a plain dict of tensors, which torch loads with
weights_only=True (the tests load it so).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

MAX_CHECKPOINT_BYTES = 8 << 30
TIMEOUT_SECONDS = 300.0
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class ConsolidationFailed(RuntimeError):
    """The checkpoint could not be turned into one file (the detail says why)."""


def consolidate(step_dir: Path, out_file: Path, *, max_bytes: int = MAX_CHECKPOINT_BYTES) -> None:
    """Write the checkpoint's model state dict to out_file (a .pt for torch.load)."""
    with tempfile.TemporaryDirectory(prefix="tb-ckpt-") as private:
        copy = Path(private) / "step"
        copy.mkdir(mode=0o700)
        copy_plain_files(step_dir, copy, max_bytes=max_bytes)
        try:
            done = subprocess.run(
                [sys.executable, "-m", "backend.checkpoint.consolidate", str(copy), str(out_file)],
                capture_output=True,
                text=True,
                timeout=TIMEOUT_SECONDS,
                cwd=private,
                env={"PATH": os.environ.get("PATH", "/usr/bin"), "OMP_NUM_THREADS": "1"},
            )
        except subprocess.TimeoutExpired:
            raise ConsolidationFailed(f"not done in {TIMEOUT_SECONDS:.0f} s") from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise ConsolidationFailed(f"the checkpoint could not be read: {last[:500]}")


def copy_plain_files(source: Path, target: Path, *, max_bytes: int) -> int:
    """Copy the regular files directly in source (no links, no subdirectories); bytes copied."""
    total = 0
    try:
        source_fd = os.open(source, _DIR_FLAGS)
    except OSError as err:
        raise ConsolidationFailed(f"{source.name} is not a plain directory") from err
    try:
        for name in sorted(os.listdir(source_fd)):
            try:
                fd = os.open(name, _FILE_FLAGS, dir_fd=source_fd)
            except OSError:
                continue  # a link (ELOOP), or gone: not part of what we read
            with os.fdopen(fd, "rb") as src:
                if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
                    continue
                with open(target / name, "xb") as dst:
                    while chunk := src.read(1 << 20):
                        total += len(chunk)
                        if total > max_bytes:
                            raise ConsolidationFailed(f"larger than {max_bytes >> 20} MiB")
                        dst.write(chunk)
    finally:
        os.close(source_fd)
    return total


def _main(step_dir: str, out_file: str) -> None:
    """In the child: read the copy with the engine's JSON reader, save the model's weights."""
    import torch
    from torch.distributed.checkpoint.format_utils import _EmptyStateDictLoadPlanner
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

    from workers.rank.engine.dcp_storage import JsonLoadPlanner, JsonReader

    class Planner(JsonLoadPlanner, _EmptyStateDictLoadPlanner):
        """Builds the state from the metadata (as dcp_to_torch_save does), values from JSON."""

    state: dict[str, object] = {}
    _load_state_dict(state, storage_reader=JsonReader(step_dir), planner=Planner(), no_dist=True)
    model = state.get("model")
    if not isinstance(model, dict) or not model:
        raise SystemExit("no model weights in this checkpoint")
    if not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in model.items()):
        raise SystemExit("the model's state is not names and tensors")
    torch.save(model, out_file)


if __name__ == "__main__":
    _main(*sys.argv[1:3])
