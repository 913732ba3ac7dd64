"""Gradient accumulation computes what one bigger batch computes."""

from __future__ import annotations

import torch
from worker_helpers import mlp_spec

from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.templates import build_task
from workers.rank.engine.train import Trainer


def test_accumulating_two_micro_batches_of_b_equals_one_batch_of_2b() -> None:
    def trained(batch_size: int, grad_accum: int) -> dict[str, torch.Tensor]:
        spec = mlp_spec(
            hyperparameters={"steps": 10, "batch_size": batch_size, "dataset_size": 256},
            grad_accum=grad_accum,
            grad_clip=1.0,
        )
        trainer = Trainer(spec, build_task("mlp", spec.hyperparameters), ParallelContext())
        for _ in range(trainer.total_steps):
            trainer.train_step()
        return trainer.model.state_dict()

    accumulated, whole = trained(16, grad_accum=2), trained(32, grad_accum=1)
    for name, expected in whole.items():
        torch.testing.assert_close(accumulated[name], expected, rtol=1e-5, atol=1e-7)
