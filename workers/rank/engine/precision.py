"""Mixed precision: bf16 autocast anywhere, fp16 autocast with a gradient scaler on GPUs only."""

from __future__ import annotations

import contextlib

import torch

from workers.contract.spec import JobSpec, Precision, Strategy
from workers.rank.engine.errors import EngineFailure


class MixedPrecision:
    """The autocast context and (fp16 only) the gradient scaler of a run."""

    def __init__(self, spec: JobSpec, device: torch.device) -> None:
        self.dtype = {
            Precision.fp32: None,
            Precision.bf16: torch.bfloat16,
            Precision.fp16: torch.float16,
        }[spec.precision]
        self.device_type = device.type
        self.scaler: torch.amp.GradScaler | None = None
        if spec.precision is Precision.fp16:
            if device.type != "cuda":
                raise EngineFailure(
                    "precision fp16 needs a CUDA GPU (it relies on a gradient scaler); "
                    "this attempt ran on CPU slots: use bf16 or fp32 there"
                )
            if spec.parallelism.strategy is not Strategy.data:
                raise EngineFailure("precision fp16 is supported with strategy 'data' only")
            self.scaler = torch.amp.GradScaler("cuda")

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        """Autocast for forward and loss, or nothing for fp32."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.dtype)
