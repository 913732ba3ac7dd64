"""Optimizer and learning-rate schedule from the spec."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import torch

from workers.contract.spec import LRSchedule


def build_optimizer(
    params: Iterable[torch.nn.Parameter], *, name: str, lr: float, weight_decay: float
) -> torch.optim.Optimizer:
    """AdamW or SGD (with momentum 0.9)."""
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=weight_decay)
    raise ValueError(f"unknown optimizer {name!r}")


def lr_at(step: int, *, peak: float, total_steps: int, schedule: LRSchedule) -> float:
    """Learning rate for optimizer step `step` (1-based): linear warmup, then constant or cosine."""
    if schedule.warmup_steps and step <= schedule.warmup_steps:
        return peak * step / schedule.warmup_steps
    if schedule.kind == "constant":
        return peak
    decay_steps = max(1, total_steps - schedule.warmup_steps)
    progress = min(1.0, (step - schedule.warmup_steps) / decay_steps)
    floor = peak * schedule.min_lr_ratio
    return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def total_norm(grads: list[torch.Tensor], *, mixed: bool | None = None) -> torch.Tensor:
    """The 2-norm of all gradients as one vector, on their device (no host sync).

    The same ops as `clip_grad_norm_` (one `_foreach_norm`, then the norm of the stacked
    norms), so the value is bit-identical to it, without its per-call grouping and copies.
    `mixed` says whether the gradients differ in device or dtype; a caller that knows it from
    the parameters passes it, which spares a per-step look at every gradient.
    """
    if not grads:
        return torch.zeros(())
    if mixed is None:
        mixed = has_mixed_kinds(grads)
    if mixed:
        return torch.nn.utils.get_total_norm(grads).float()
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    return norm if norm.dtype is torch.float32 else norm.float()


def finite_probe(tensors: Sequence[torch.Tensor], *, mixed: bool | None = None) -> torch.Tensor:
    """A 0-d float32 tensor on their device (no host sync), finite exactly when every element
    of `tensors` is, unless their finite values overflow it (past 3.4e38).

    On CPU the sum of one `sum` per tensor, the cheapest complete check found there (a
    `_foreach_norm` is a loop of norms on CPU; docs/benchmarks.md "The gradient-norm pass
    every N steps"); on a GPU the sum of one fused `_foreach_norm` (a launch or two, where a
    `sum` per tensor is a launch each). `mixed` as for `total_norm`.
    """
    if not tensors:
        return torch.zeros(())
    if mixed is None:
        mixed = has_mixed_kinds(tensors)
    with torch.no_grad():  # of the weights too: no graph
        if mixed:
            device = tensors[0].device
            parts = [t.sum().float().to(device) for t in tensors]
        elif tensors[0].device.type == "cpu":
            parts = [t.sum() for t in tensors]
        else:
            parts = list(torch._foreach_norm(list(tensors), 2.0))
        total = torch.stack(parts).sum()
    return total if total.dtype is torch.float32 else total.float()


def grads_of(params: list[torch.nn.Parameter]) -> list[torch.Tensor]:
    """The gradients that exist (`.grad` is a property, not a plain attribute: read once each)."""
    return [grad for p in params if (grad := p.grad) is not None]


def has_mixed_kinds(tensors: Iterable[torch.Tensor]) -> bool:
    """Whether the tensors (or the gradients of these parameters) differ in device or dtype."""
    return len({(t.device, t.dtype) for t in tensors}) > 1
