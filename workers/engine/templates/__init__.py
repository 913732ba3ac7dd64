"""Built-in templates: a model plus the data it learns from, built from a JobSpec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn


@dataclass
class Task:
    """What a template gives the training loop."""

    model: nn.Sequential
    inputs: torch.Tensor
    targets: torch.Tensor
    loss_fn: nn.Module


def build_task(template: str, hyperparameters: dict[str, Any]) -> Task:
    """Build the named template's model and dataset (deterministic from the seed)."""
    if template == "mlp":
        from workers.engine.templates import mlp

        return mlp.build(hyperparameters)
    raise ValueError(f"template {template!r} is not supported by the engine yet")
