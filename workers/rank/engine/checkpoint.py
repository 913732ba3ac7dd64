"""Checkpoints with torch.distributed.checkpoint: atomic, pruned, JSON metadata, never a pickle."""

from __future__ import annotations

import errno
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_state_dict,
)

from workers.contract.checkpoints import checkpoint_path, complete_checkpoints
from workers.contract.spec import Checkpointing
from workers.rank import sdk
from workers.rank.engine.dcp_storage import (
    JsonLoadPlanner,
    JsonReader,
    JsonSavePlanner,
    JsonWriter,
    unwrap,
)
from workers.rank.engine.errors import CheckpointIncomplete, CheckpointNoSpace, PauseForDiskFull

#: numbers saved beside the weights: step, epoch, global_batch, data_offset, lr_scale, ...
Progress = dict[str, float]

#: optimizer state and hyperparameters keyed by parameter name ("param_groups.3.0.weight.lr"),
#: not by group index: pipeline stages each have their own group 0, which a list-shaped
#: state would save under one shared key (one stage's copy wins) and load into every stage
_OPTIONS = StateDictOptions(flatten_optimizer_state_dict=True)
#: how Trainboard shaped it before that (its pickled checkpoints resume: fine for `data` jobs)
_LIST_OPTIONS, _LIST_KEY = StateDictOptions(), "optim.param_groups.0.params"


def state_to_save(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    progress: Progress,
    options: StateDictOptions = _OPTIONS,
) -> dict:
    """The state to save or load into: unwrapped model and optimizer, progress, RNG."""
    model_state, optim_state = get_state_dict(model, optimizer, options=options)
    state: dict[str, Any] = {
        "model": model_state,
        "optim": optim_state,
        "progress": {k: torch.tensor(float(v), dtype=torch.float64) for k, v in progress.items()},
        "rng": {"cpu": torch.get_rng_state()},
    }
    if torch.cuda.is_available():
        state["rng"]["cuda"] = torch.cuda.get_rng_state()
    return state


def staging(checkpoint_dir: Path, step: int, *, tag: str) -> tuple[Path, Path, bool]:
    """Where a step's checkpoint goes: its step-<N> folder, the temporary folder the ranks
    write it into first (rank 0 makes the parent and clears any leftover), and whether this
    rank leads (rank 0, or the only process)."""
    final = checkpoint_path(checkpoint_dir, step)
    tmp = checkpoint_dir / f".tmp-{final.name}-{tag}"
    leader = not dist.is_initialized() or dist.get_rank() == 0
    if leader:
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return final, tmp, leader


def save(
    checkpoint_dir: Path,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    progress: Progress,
    keep_last: int,
    tag: str,
) -> Path:
    """Save collectively into a temporary directory, then rank 0 renames it to step-<N>.

    Rank 0 then deletes all but the newest `keep_last` checkpoints (0: none).
    """
    final, tmp, leader = staging(checkpoint_dir, int(progress["step"]), tag=tag)
    _barrier()
    writer = JsonWriter(tmp)
    try:
        state = state_to_save(model, optimizer, progress)
        dcp.save(state, storage_writer=writer, planner=JsonSavePlanner())
    except BaseException as error:
        if not _no_space(error):
            raise
        # DCP raised this on every rank (it gathers the ranks' write results): all go on,
        # each removing the partial folder (unshared run roots have one per node)
        shutil.rmtree(tmp, ignore_errors=True)
        _barrier()
        if leader:
            shutil.rmtree(tmp, ignore_errors=True)
        raise CheckpointNoSpace(
            f"checkpoint step {int(progress['step'])} not saved: no space left on device "
            f"({_free_mib(checkpoint_dir)} MiB free)"
        ) from None
    _barrier()  # every rank's shard is on disk before the directory becomes visible
    if leader and writer.missing:
        shutil.rmtree(tmp, ignore_errors=True)
        raise CheckpointIncomplete(
            f"checkpoint step {progress['step']} is incomplete: shards {writer.missing} are not "
            f"in {checkpoint_dir} as rank 0 sees it; the nodes do not share their run root "
            "(docs/deploy.md)"
        )
    if leader:
        if final.exists():  # the same step saved by an earlier attempt: identical content
            shutil.rmtree(tmp)
        else:
            tmp.rename(final)
        for old in complete_checkpoints(checkpoint_dir)[:-keep_last] if keep_last else []:
            shutil.rmtree(old, ignore_errors=True)
    return final


def no_space(full: CheckpointNoSpace, *, spec: Checkpointing, step: int, leader: bool) -> None:
    """Warn that a checkpoint found no space; raise PauseForDiskFull if the policy says pause.

    Every rank gets here together (DCP gathers the ranks' write results), so with `pause`
    they all leave, explained; with `continue` training goes on and the previous checkpoint
    stays the newest until the next interval saves.
    """
    pause = spec.on_disk_full == "pause"
    then = "pausing the job" if pause else "retrying later"
    if leader:
        message = f"{full}; the previous checkpoint stays the newest, {then}"
        sdk.event("warning", message=message, step=step)
        print(message, file=sys.stderr, flush=True)
    if pause:
        raise PauseForDiskFull(
            f"checkpoint step {step} not saved; paused at the last checkpoint "
            "(checkpoint.on_disk_full: pause)"
        )


def read_progress(path: Path) -> Progress:
    """The progress numbers of a checkpoint (step, epoch, global_batch, ...), nothing else."""
    reader = JsonReader(path)
    names = [
        key.removeprefix("progress.")
        for key in reader.read_metadata().state_dict_metadata
        if key.startswith("progress.")
    ]
    state = {"progress": {name: torch.zeros((), dtype=torch.float64) for name in names}}
    _load(state, reader)
    return {name: float(value) for name, value in state["progress"].items()}


def load(path: Path, *, model: nn.Module, optimizer: torch.optim.Optimizer) -> Progress:
    """Load a checkpoint (resharded to this world size and split) in place; return its progress."""
    reader = JsonReader(path)
    saved = reader.read_metadata().state_dict_metadata
    progress = {k.removeprefix("progress."): 0.0 for k in saved if k.startswith("progress.")}
    options = _LIST_OPTIONS if reader.legacy and _LIST_KEY in saved else _OPTIONS
    state = state_to_save(model, optimizer, progress, options)
    if "rng.cuda" not in saved:
        state["rng"].pop("cuda", None)
    _load(state, reader)
    set_state_dict(
        model,
        optimizer,
        model_state_dict=state["model"],
        optim_state_dict=state["optim"],
        options=options,
    )
    torch.set_rng_state(state["rng"]["cpu"])
    if "cuda" in state["rng"]:
        torch.cuda.set_rng_state(state["rng"]["cuda"])
    return {name: float(value) for name, value in state["progress"].items()}


def _load(state: dict[str, Any], reader: JsonReader) -> None:
    """DCP load (resharding to this world), raising a rank's CheckpointRefused as itself."""
    try:
        dcp.load(state, storage_reader=reader, planner=JsonLoadPlanner())
    except BaseException as error:
        found = unwrap(error)
        if found is error:
            raise
        raise found from None


def _no_space(error: BaseException) -> bool:
    """Whether error, or a rank's failure DCP wrapped in it, is ENOSPC (or EDQUOT)."""
    failures = [f[0] for f in getattr(error, "failures", {}).values()]
    for found in [error, *failures]:
        while found is not None:
            if isinstance(found, OSError) and found.errno in (errno.ENOSPC, errno.EDQUOT):
                return True
            found = found.__cause__ or found.__context__
    return False


def _free_mib(path: Path) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize >> 20


def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()
