"""Out-of-memory failures of the engine: named for the control plane, and a test hook."""

from __future__ import annotations

import torch

from workers.contract.oom import OOM_PREFIX, TEST_OOM_VARIABLE
from workers.rank.engine.errors import EngineFailure
from workers.rank.engine.pipeline import Batch
from workers.rank.engine.train import Trainer


class OutOfMemory(EngineFailure):
    """The device (CUDA) or the host ran out of memory; `health.on_oom` decides what follows."""


def out_of_memory(err: BaseException, trainer: Trainer, *, rank: int) -> OutOfMemory:
    """The failure to report: where memory ran out and with which micro-batch."""
    kind = "host MemoryError" if isinstance(err, MemoryError) else "CUDA out of memory"
    detail = (str(err).strip().splitlines() or [""])[0][:300]
    return OutOfMemory(
        f"{OOM_PREFIX}: {kind} at step {trainer.step + 1} on rank {rank} with micro-batch "
        f"{trainer.batch_size} x accumulation {trainer.accum} (global batch "
        f"{trainer.global_batch})" + (f": {detail}" if detail else "")
    )


def inject_host_oom(trainer: Trainer, at_step: int, above: int) -> None:
    """Tests only: raise MemoryError when step `at_step` starts with a micro-batch above `above`.

    It wraps the runner's forward-backward, so a run without the hook does no extra work.
    """
    real = trainer.runner.forward_backward

    def forward_backward(batches: list[Batch]) -> torch.Tensor | None:
        if trainer.step + 1 == at_step and trainer.batch_size > above:
            raise MemoryError(f"injected by {TEST_OOM_VARIABLE} at step {at_step}")
        return real(batches)

    trainer.runner.forward_backward = forward_backward  # type: ignore[method-assign]
