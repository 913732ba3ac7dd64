"""Template `cnn`: classify procedurally drawn stripe and checker patterns (4 classes)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from workers.rank.engine.templates import Task

CLASSES = 4


def make_model(channels: int, blocks: int, image_size: int) -> nn.Sequential:
    """`blocks` conv blocks; the first reads the image, the last ends in the class head.

    No batch norm: its statistics would depend on how a batch is cut into pipeline
    micro-batches, so a pipelined run would not compute what one process computes.
    """

    def conv(c_in: int) -> list[nn.Module]:
        return [nn.Conv2d(c_in, channels, 3, padding=1), nn.GroupNorm(1, channels), nn.GELU()]

    layers: list[nn.Module] = [nn.Sequential(*conv(1))]
    layers += [nn.Sequential(*conv(channels)) for _ in range(blocks - 2)]
    head = [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, CLASSES)]
    layers.append(nn.Sequential(*conv(channels), *head))
    del image_size  # the model is size-agnostic; the data decides the image side
    return nn.Sequential(*layers)


def make_data(*, seed: int, size: int, image_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Noisy images of horizontal, vertical or diagonal stripes, or a checkerboard."""
    gen = torch.Generator().manual_seed(seed + 2_000_003)
    targets = torch.randint(0, CLASSES, (size,), generator=gen)
    period = 2.0 + 4.0 * torch.rand(size, 1, 1, generator=gen)
    phase = 2 * math.pi * torch.rand(size, 1, 1, generator=gen)
    axis = torch.arange(image_size, dtype=torch.float32)
    ys, xs = axis.view(1, -1, 1), axis.view(1, 1, -1)
    wave = {
        0: ys.expand(size, -1, image_size),
        1: xs.expand(size, image_size, -1),
        2: (xs + ys) / math.sqrt(2),
    }
    images = torch.empty(size, image_size, image_size)
    for label in range(CLASSES):
        chosen = targets == label
        if label < 3:
            pattern = torch.sin(2 * math.pi * wave[label] / period + phase)
        else:
            pattern = torch.sin(2 * math.pi * xs / period + phase) * torch.sin(
                2 * math.pi * ys / period
            )
        images[chosen] = pattern[chosen]
    images += 0.5 * torch.randn(images.shape, generator=gen)
    return images.unsqueeze(1), targets


def build(hp: dict[str, Any]) -> Task:
    """The cnn task: model initialised from the seed, so every rank starts identical."""
    torch.manual_seed(hp["seed"])
    model = make_model(hp["channels"], hp["blocks"], hp["image_size"])
    inputs, targets = make_data(
        seed=hp["seed"], size=hp["dataset_size"], image_size=hp["image_size"]
    )
    return Task(model=model, inputs=inputs, targets=targets, loss_fn=nn.CrossEntropyLoss())
