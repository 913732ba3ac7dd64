"""Run under torchrun: train the engine's Trainer for the spec's steps, save each rank's weights."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist

from workers.engine.distributed import ParallelContext
from workers.engine.templates import build_task
from workers.engine.train import Trainer
from workers.spec import JobSpec


def main(spec_file: str, out_dir: str) -> None:
    dist.init_process_group("gloo")  # env:// from torchrun
    spec = JobSpec.model_validate_json(Path(spec_file).read_text())
    assert spec.template is not None
    ctx = ParallelContext(dist.get_rank(), dist.get_world_size(), torch.device("cpu"))
    trainer = Trainer(spec, build_task(spec.template, spec.hyperparameters), ctx)
    for _ in range(trainer.total_steps):
        trainer.train_step()
    torch.save(trainer.model.state_dict(), Path(out_dir) / f"rank{ctx.rank}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
