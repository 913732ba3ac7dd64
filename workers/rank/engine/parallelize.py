"""Apply the spec's strategy to a model: DDP for `data`, pipeline stages for `model`/`hybrid`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Protocol

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from workers.contract.spec import JobSpec, Strategy
from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.optim import grads_of, has_mixed_kinds, total_norm
from workers.rank.engine.pipeline import Batch, PipelineRunner
from workers.rank.engine.updates import AllreduceTraffic, UpdateRunner

Autocast = Callable[[], contextlib.AbstractContextManager[None]]


class Runner(Protocol):
    """Forward and backward of one optimizer step's micro-batches on this rank."""

    #: this rank's parameters, unwrapped (the whole model, or its pipeline stage)
    model: nn.Module

    @property
    def has_loss(self) -> bool: ...

    def forward_backward(self, batches: list[Batch]) -> torch.Tensor | None: ...

    def grad_norm(self) -> torch.Tensor: ...


class DataParallelRunner:
    """DistributedDataParallel over every rank; accumulation syncs only at the last micro-step."""

    has_loss = True

    def __init__(
        self,
        model: nn.Module,
        loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        ctx: ParallelContext,
        *,
        bucket_cap_mb: float,
        autocast: Autocast,
        scale_loss: Callable[[torch.Tensor], torch.Tensor] = lambda loss: loss,
        replicate: bool = True,
    ) -> None:
        self.ctx, self.loss_fn, self.autocast, self.scale_loss = ctx, loss_fn, autocast, scale_loss
        self.model = model.to(ctx.device)
        #: fixed for the run: walking the module tree every step costs more than the norm
        self.params = list(self.model.parameters())
        self.mixed = has_mixed_kinds(self.params)
        #: a CPU rank's batches are where they will be used (`.to` parses its arguments anyway)
        self.to_device = ctx.device.type != "cpu"
        self.wrapped: nn.Module = self.model
        #: DDP's all-reduce bytes, counted by its communication hook
        self.traffic: AllreduceTraffic | None = None
        if ctx.world_size > 1 and replicate:  # else updates.py exchanges the gradients
            ddp = DistributedDataParallel(
                self.model,
                device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None,
                bucket_cap_mb=bucket_cap_mb,
            )
            traffic = self.traffic = AllreduceTraffic()
            # unannotated: DDP refuses a hook whose annotations are strings (postponed here)
            ddp.register_comm_hook(None, lambda group, bucket: traffic.hook(group, bucket))
            self.wrapped = ddp

    def forward_backward(self, batches: list[Batch]) -> torch.Tensor:
        """Mean loss over the micro-batches; gradients hold their mean over every rank.

        The loss stays on the device (no host sync); one micro-batch costs no extra tensor op.
        """
        count = len(batches)
        total: torch.Tensor | None = None
        no_sync = getattr(self.wrapped, "no_sync", None)
        for i, (inputs, targets) in enumerate(batches):
            if self.to_device:
                inputs = inputs.to(self.ctx.device, non_blocking=True)
                targets = targets.to(self.ctx.device, non_blocking=True)
            # sync gradients only at the last micro-step: earlier ones just accumulate locally
            last = i == count - 1
            with contextlib.nullcontext() if last or no_sync is None else no_sync():
                with self.autocast():
                    loss = self.loss_fn(self.wrapped(inputs), targets)
                # x / 1 is exact, so skipping it for one micro-batch changes no bit
                self.scale_loss(loss / count if count > 1 else loss).backward()
            held = loss.detach().float()
            total = held if total is None else total + held
        assert total is not None, "an optimizer step has at least one micro-batch"
        return total / count if count > 1 else total

    def grad_norm(self) -> torch.Tensor:
        """Norm of the (already averaged) gradients."""
        return total_norm(grads_of(self.params), mixed=self.mixed)


def parallelize(
    model: nn.Sequential,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    ctx: ParallelContext,
    *,
    spec: JobSpec,
    autocast: Autocast,
    scale_loss: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> Runner:
    """The runner for the spec's strategy on this rank."""
    par = spec.parallelism
    if par.strategy is Strategy.data:
        runner = DataParallelRunner(
            model,
            loss_fn,
            ctx,
            bucket_cap_mb=par.bucket_cap_mb,
            autocast=autocast,
            scale_loss=scale_loss or (lambda loss: loss),
            replicate=par.mode == "sync/allreduce",
        )
        return runner if par.mode == "sync/allreduce" else UpdateRunner(runner, ctx, par)
    assert scale_loss is None, "loss scaling (fp16) is refused for pipelines before this point"
    return PipelineRunner(
        model, loss_fn, ctx, microbatches=par.microbatches, schedule=par.schedule, autocast=autocast
    )
