"""Checkpoints as Trainboard wrote them up to d80b501: DCP's stock writer, pickles throughout.

`old_save` is `workers/engine/checkpoint.py` of d80b501 (`git show d80b501:workers/engine/
checkpoint.py`): its state and staging folders (the same as the engine's today, `state_to_save`
and `staging`) and the `dcp.save(state, checkpoint_id=tmp)` of its `save`,
with DCP's default `FileSystemWriter` (a pickled `.metadata`, every shard item a `torch.save`
archive). Only the pruning is left out.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.metadata import Metadata
from torch.distributed.checkpoint.state_dict import StateDictOptions

from workers.rank.engine.checkpoint import staging, state_to_save

_OPTIONS = StateDictOptions(flatten_optimizer_state_dict=True)


def old_save(
    checkpoint_dir: Path,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    progress: dict[str, float],
    tag: str = "old",
    options: StateDictOptions = _OPTIONS,
) -> Path:
    """Save collectively into a temporary directory, then rank 0 renames it to step-<N>.

    `options=StateDictOptions()` writes the list-shaped optimizer state of still earlier ones.
    """
    final, tmp, leader = staging(checkpoint_dir, int(progress["step"]), tag=tag)
    if dist.is_initialized():
        dist.barrier()
    dcp.save(state_to_save(model, optimizer, progress, options), checkpoint_id=tmp)
    if dist.is_initialized():
        dist.barrier()
    if leader:
        tmp.rename(final)
    return final


def stock_metadata(checkpoint: Path) -> Metadata:
    """The metadata as DCP's own reader unpickles it (test side only: our own file)."""
    return FileSystemReader(checkpoint).read_metadata()


def plant(checkpoint: Path, fqn: str, blob: bytes) -> None:
    """Append `blob` to the shard holding `fqn` and re-pickle the metadata to point at it."""
    metadata = stock_metadata(checkpoint)
    (index,) = [i for i in metadata.storage_data if i.fqn == fqn]
    info = metadata.storage_data[index]
    shard = checkpoint / info.relative_path
    info.offset, info.length = shard.stat().st_size, len(blob)
    with open(shard, "ab") as stream:
        stream.write(blob)
    (checkpoint / ".metadata").write_bytes(pickle.dumps(metadata))


def archive(data_pkl: bytes, records: dict[str, bytes] | None = None) -> bytes:
    """A torch.save-shaped archive (stored zip) whose data.pkl is `data_pkl`."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", data_pkl)
        zf.writestr("archive/byteorder", b"little")
        for name, data in (records or {}).items():
            zf.writestr(f"archive/{name}", data)
    return out.getvalue()
