"""Built-in templates: a model plus the data it learns from, built from a JobSpec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn


@dataclass
class Task:
    """What a template gives the training loop: a Sequential of pipeline-splittable units."""

    model: nn.Sequential
    inputs: torch.Tensor
    targets: torch.Tensor
    loss_fn: nn.Module
    #: tokens per sample for a tokens/s rate (sequence models only)
    tokens_per_sample: int | None = None


def build_task(template: str, hyperparameters: dict[str, Any]) -> Task:
    """Build the named template's model and dataset (deterministic from the seed)."""
    if template == "mlp":
        from workers.rank.engine.templates import mlp

        return mlp.build(hyperparameters)
    if template == "cnn":
        from workers.rank.engine.templates import cnn

        return cnn.build(hyperparameters)
    if template == "gpt":
        from workers.rank.engine.templates import gpt

        return gpt.build(hyperparameters)
    raise ValueError(f"unknown template {template!r}")
