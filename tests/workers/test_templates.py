"""Every template really learns in a CI-sized run, in fp32 and bf16, and splits into stages."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from workers.contract.catalog import PIPELINE_UNITS
from workers.contract.spec import JobSpec
from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.pipeline import balanced_split
from workers.rank.engine.templates import build_task
from workers.rank.engine.train import Trainer

#: CI sizes, and the fraction of its first losses the mean of the last five must fall below
CASES: dict[str, tuple[dict[str, Any], float]] = {
    "mlp": ({"steps": 40, "batch_size": 16, "dataset_size": 512, "hidden": 32, "layers": 3}, 0.6),
    "cnn": (
        {"steps": 40, "batch_size": 16, "dataset_size": 512, "channels": 8, "blocks": 2},
        0.6,
    ),
    "gpt": (
        {"steps": 60, "batch_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32},
        0.75,
    ),
}


def losses(template: str, precision: str) -> list[float]:
    """Per-step losses of a one-process run."""
    hp, _ = CASES[template]
    spec = JobSpec.model_validate(
        {
            "name": f"{template}-learns",
            "template": template,
            "hyperparameters": {**hp, "lr": 0.01 if template == "gpt" else 0.02},
            "precision": precision,
        }
    )
    trainer = Trainer(spec, build_task(template, spec.hyperparameters), ParallelContext())
    seen: list[float] = []
    trainer.metrics = type(trainer.metrics)(lambda rows: seen.extend(r["loss"] for _, r in rows))
    for _ in range(trainer.total_steps):
        trainer.train_step()
    trainer.metrics.flush()
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("template", list(CASES))
def test_loss_falls_by_the_stated_fraction(template: str, precision: str) -> None:
    seen = losses(template, precision)
    _, fraction = CASES[template]
    assert sum(seen[-5:]) < fraction * sum(seen[:5]), seen


@pytest.mark.parametrize("template", list(CASES))
def test_each_template_has_one_pipeline_unit_per_layer_hyperparameter(template: str) -> None:
    hp, _ = CASES[template]
    spec = JobSpec.model_validate({"name": "units", "template": template, "hyperparameters": hp})
    model = build_task(template, spec.hyperparameters).model
    assert len(model) == spec.hyperparameters[PIPELINE_UNITS[template]]
    costs = [sum(p.numel() for p in layer.parameters()) for layer in model]
    assert balanced_split(costs, len(model)) == [(i, i + 1) for i in range(len(model))]


def test_balanced_split_minimises_the_largest_stage() -> None:
    assert balanced_split([10, 1, 1, 1, 1, 10], 2) == [(0, 3), (3, 6)]
    split = balanced_split([5, 5, 5, 5], 3)
    assert len(split) == 3 and max(end - start for start, end in split) == 2
    with pytest.raises(ValueError):
        balanced_split([1, 1], 3)


def test_bf16_autocast_really_computes_in_bf16() -> None:
    spec = JobSpec.model_validate({"name": "bf16", "template": "mlp", "precision": "bf16"})
    trainer = Trainer(spec, build_task("mlp", spec.hyperparameters), ParallelContext())
    with trainer.precision.autocast():
        out = trainer.model(torch.randn(2, spec.hyperparameters["features"]))
    assert out.dtype == torch.bfloat16
