"""Pipeline (`model`) and pipeline × data (`hybrid`) parallelism with torch.distributed.pipelining.

Stage replicas are not wrapped in DistributedDataParallel: handed to a pipelining schedule,
DDP-wrapped stages drift apart silently (see docs/engine.md). Instead each stage's gradients
are averaged over its data-parallel group after `schedule.step()`, one flat all-reduce per
optimizer step, which keeps the replicas bit-identical.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.optim import grads_of, has_mixed_kinds, total_norm

Batch = tuple[torch.Tensor, torch.Tensor]


def balanced_split(costs: Sequence[int], parts: int) -> list[tuple[int, int]]:
    """Contiguous [start, end) ranges, one per part, each non-empty, minimising the largest sum."""
    n = len(costs)
    if not 1 <= parts <= n:
        raise ValueError(f"cannot split {n} layers into {parts} non-empty stages")
    prefix = [0]
    for cost in costs:
        prefix.append(prefix[-1] + cost)
    inf = float("inf")
    # best[k][i]: smallest possible largest stage when the first i layers form k stages
    best = [[inf] * (n + 1) for _ in range(parts + 1)]
    cut = [[0] * (n + 1) for _ in range(parts + 1)]
    best[0][0] = 0
    for k in range(1, parts + 1):
        for i in range(k, n - (parts - k) + 1):
            for j in range(k - 1, i):
                worst = max(best[k - 1][j], prefix[i] - prefix[j])
                if worst < best[k][i]:
                    best[k][i], cut[k][i] = worst, j
    bounds, end = [], n
    for k in range(parts, 0, -1):
        bounds.append((cut[k][end], end))
        end = cut[k][end]
    return bounds[::-1]


def stage_module(model: nn.Sequential, start: int, end: int) -> nn.Sequential:
    """Layers [start, end) keeping their names in the full model, so state dict keys are global
    and a checkpoint reshards onto any other split."""
    return nn.Sequential(OrderedDict((str(i), model[i]) for i in range(start, end)))


class PipelineRunner:
    """Runs this rank's stage: forward and backward of every micro-batch, then the dp average."""

    def __init__(
        self,
        model: nn.Sequential,
        loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        ctx: ParallelContext,
        *,
        microbatches: int,
        schedule: str,
        autocast: Callable[[], contextlib.AbstractContextManager[None]],
    ) -> None:
        if ctx.pp_group is None:
            ctx.build_mesh()
        self.ctx, self.microbatches, self.autocast = ctx, microbatches, autocast
        costs = [sum(p.numel() for p in layer.parameters()) for layer in model]
        self.bounds = balanced_split(costs, ctx.pp_size)
        self.model: nn.Module = stage_module(model, *self.bounds[ctx.pp_rank]).to(ctx.device)
        self.params = list(self.model.parameters())
        self.mixed = has_mixed_kinds(self.params)
        self.is_first, self.is_last = ctx.pp_rank == 0, ctx.pp_rank == ctx.pp_size - 1
        self.accum = 1
        stage = PipelineStage(self.model, ctx.pp_rank, ctx.pp_size, ctx.device, group=ctx.pp_group)
        kind = ScheduleGPipe if schedule == "gpipe" else Schedule1F1B

        def scaled_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            # the mean over the whole optimizer step: micro-batches x accumulation steps
            return loss_fn(output, target) / (microbatches * self.accum)

        # scale_grads=False: the schedule would divide *all* gradients, including those
        # accumulated by earlier steps of the same optimizer step
        self.schedule = kind(stage, microbatches, loss_fn=scaled_loss, scale_grads=False)

    @property
    def has_loss(self) -> bool:
        return self.is_last

    def forward_backward(self, batches: list[Batch]) -> torch.Tensor | None:
        """Run the schedule once per accumulation step; the mean loss on the last stage."""
        self.accum = len(batches)
        total = torch.zeros((), device=self.ctx.device)
        for inputs, targets in batches:
            losses: list[torch.Tensor] = []
            with self.autocast():
                if self.is_first:
                    self.schedule.step(inputs.to(self.ctx.device), return_outputs=False)
                elif self.is_last:
                    target = targets.to(self.ctx.device)
                    self.schedule.step(target=target, losses=losses, return_outputs=False)
                else:
                    self.schedule.step(return_outputs=False)
            for loss in losses:
                total += loss.detach().float()
        self._average_over_replicas()
        return total if self.is_last else None

    def grad_norm(self) -> torch.Tensor:
        """The gradient norm of the whole model: stage norms combined over the pipeline."""
        grads = grads_of(self.params)
        if grads:
            squared = total_norm(grads, mixed=self.mixed).square()
        else:
            squared = torch.zeros((), device=self.ctx.device)
        dist.all_reduce(squared, group=self.ctx.pp_group)
        return squared.sqrt()

    def _average_over_replicas(self) -> None:
        if self.ctx.dp_size == 1:
            return
        grads = grads_of(self.params)
        flat = _flatten_dense_tensors(grads)
        dist.all_reduce(flat, group=self.ctx.dp_group)
        flat /= self.ctx.dp_size
        for grad, averaged in zip(grads, _unflatten_dense_tensors(flat, grads), strict=True):
            grad.copy_(averaged)
