"""Real checkpoints of a small model, as the engine writes them, for the tests that read them."""

from __future__ import annotations

from pathlib import Path

import torch

from workers.rank.engine.checkpoint import save


def small_checkpoints(
    directory: Path, steps: tuple[int, ...], *, seed: int = 0, hidden: int = 8
) -> dict[int, dict[str, torch.Tensor]]:
    """Checkpoints step-<N> in `directory` of a 4 -> hidden -> 2 model and its SGD (momentum)
    state, one training step before each; the model's weights at each step."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(4, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 2)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    weights = {}
    for step in steps:
        model(torch.randn(3, 4)).sum().backward()
        optimizer.step()
        save(
            directory,
            model=model,
            optimizer=optimizer,
            progress={"step": step},
            keep_last=0,
            tag="t",
        )
        weights[step] = {k: v.clone() for k, v in model.state_dict().items()}
    return weights
