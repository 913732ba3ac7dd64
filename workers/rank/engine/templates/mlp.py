"""Template `mlp`: classify synthetic points whose labels come from a fixed random teacher."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from workers.rank.engine.templates import Task


def make_model(features: int, hidden: int, layers: int, classes: int) -> nn.Sequential:
    """`layers` blocks (the first reads the features, the last ends in the class head).

    One flat Sequential of equal-role blocks, so it can be split into pipeline stages.
    """
    blocks: list[nn.Module] = [nn.Sequential(nn.Linear(features, hidden), nn.GELU())]
    blocks += [nn.Sequential(nn.Linear(hidden, hidden), nn.GELU()) for _ in range(layers - 2)]
    blocks.append(nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, classes)))
    return nn.Sequential(*blocks)


def make_data(
    *, seed: int, size: int, features: int, classes: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian inputs labelled by the argmax of a random two-layer teacher network."""
    gen = torch.Generator().manual_seed(seed + 1_000_003)
    inputs = torch.randn(size, features, generator=gen)
    w1 = torch.randn(features, 4 * classes, generator=gen) / features**0.5
    w2 = torch.randn(4 * classes, classes, generator=gen) / (4 * classes) ** 0.5
    targets = (torch.tanh(inputs @ w1) @ w2).argmax(dim=1)
    return inputs, targets


def build(hp: dict[str, Any]) -> Task:
    """The mlp task: model initialised from the seed, so every rank starts identical."""
    torch.manual_seed(hp["seed"])
    model = make_model(hp["features"], hp["hidden"], hp["layers"], hp["classes"])
    inputs, targets = make_data(
        seed=hp["seed"], size=hp["dataset_size"], features=hp["features"], classes=hp["classes"]
    )
    return Task(model=model, inputs=inputs, targets=targets, loss_fn=nn.CrossEntropyLoss())
