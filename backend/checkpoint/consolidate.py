"""One checkpoint (DCP shards, JSON metadata) as one torch.save file of the model's weights.

Built by the control plane, never by the job: the step directory (which the job's ranks
wrote, and might have filled with links or swapped for one) is given as a descriptor opened
without following links (backend/checkpoint/service.py), and its regular files are copied,
read from their own descriptors and capped in size, into a private directory. A child
process reads the copy: first its metadata is checked against the shapes it describes
(backend/checkpoint/bounds.py, before torch is even imported), then the engine's pickle-free
reader loads it and torch.save writes the model's tensors: a plain dict of tensors, which
torch loads with weights_only=True (the tests load it so). The child is bounded in address
space (RLIMIT_AS), CPU time and wall time.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from workers.contract.run_files import UnsafeRunPath, open_file, regular_files

MAX_CHECKPOINT_BYTES = 8 << 30
TIMEOUT_SECONDS = 300.0
#: the child's address space: torch alone maps ~0.7 GiB; the model is loaded about twice
BASE_ADDRESS_SPACE = 2 << 30
ADDRESS_SPACE_PER_BYTE = 3
#: the child's exit status when the checkpoint is refused for what it is
REFUSED = 3
#: what the child's stderr says when RLIMIT_AS stopped it (Python, torch, a shared library)
_OUT_OF_MEMORY = (
    "MemoryError",
    "DefaultCPUAllocator",
    "failed to map segment",
    "Memory allocation",
)


class ConsolidationFailed(RuntimeError):
    """The checkpoint could not be turned into one file (the detail says why)."""


def consolidate(step_fd: int, out_file: Path, *, max_bytes: int = MAX_CHECKPOINT_BYTES) -> None:
    """Write the model state dict of the checkpoint whose directory step_fd is to out_file."""
    with tempfile.TemporaryDirectory(prefix="tb-ckpt-") as private:
        copy = Path(private) / "step"
        copy.mkdir(mode=0o700)
        size = copy_plain_files(step_fd, copy, max_bytes=max_bytes)
        limit = BASE_ADDRESS_SPACE + ADDRESS_SPACE_PER_BYTE * size
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "backend.checkpoint.consolidate",
                    str(copy),
                    str(out_file),
                    str(limit),
                ],
                capture_output=True,
                text=True,
                timeout=TIMEOUT_SECONDS,
                cwd=private,
                env={"PATH": os.environ.get("PATH", "/usr/bin"), "OMP_NUM_THREADS": "1"},
            )
        except subprocess.TimeoutExpired:
            raise ConsolidationFailed(f"not done in {TIMEOUT_SECONDS:g} s") from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            if any(sign in done.stderr for sign in _OUT_OF_MEMORY):
                last = f"it needs more than {limit >> 20} MiB of memory to read"
            raise ConsolidationFailed(f"the checkpoint could not be read: {last[:500]}")


def _limit(address_space: int) -> None:
    """In the child, first thing (no preexec_fn: the API is threaded): bounded memory and CPU."""
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    cpu = int(TIMEOUT_SECONDS) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))


def copy_plain_files(source_fd: int, target: Path, *, max_bytes: int) -> int:
    """Copy the regular files directly in the directory source_fd (no links, no
    subdirectories), each read from its own descriptor; bytes copied."""
    total = 0
    try:
        names = sorted(regular_files(source_fd))
    except OSError as err:
        raise ConsolidationFailed("the checkpoint directory could not be read") from err
    for name in names:
        try:
            fd = open_file(source_fd, name)
        except UnsafeRunPath:
            continue  # swapped for a link, or gone: not part of what we read
        with os.fdopen(fd, "rb") as src, open(target / name, "xb") as dst:
            while chunk := src.read(1 << 20):
                total += len(chunk)
                if total > max_bytes:
                    raise ConsolidationFailed(f"larger than {max_bytes >> 20} MiB")
                dst.write(chunk)
    return total


def _main(step_dir: str, out_file: str, address_space: str) -> None:
    """In the child: check the copy's metadata, read it with the engine's JSON reader, save
    the model's weights."""
    _limit(int(address_space))
    from backend.checkpoint.bounds import MetadataRefused, check_checkpoint

    try:
        check_checkpoint(Path(step_dir))
    except MetadataRefused as refusal:
        print(f"checkpoint refused: {refusal}", file=sys.stderr)
        raise SystemExit(REFUSED) from None

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
    _main(*sys.argv[1:4])
