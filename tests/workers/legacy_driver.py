"""Under torchrun: train like parallel_driver.py, checkpointing as Trainboard did at d80b501."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from parallel_driver import DumpingTrainer

from tests.security.legacy_checkpoint import old_save
from workers.contract.spec import JobSpec
from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.templates import build_task


class LegacyTrainer(DumpingTrainer):
    """Checkpoints with DCP's stock writer (pickled metadata, torch.save shards)."""

    def save(self) -> Path | None:
        assert self.checkpoint_dir is not None
        progress = {
            "step": self.step,
            "epoch": self.batches.epoch_of((self.step + self.data_offset) * self.accum),
            "global_batch": self.global_batch,
            "data_offset": self.data_offset,
            "lr_scale": self.lr_scale,
            "rollbacks": self.rollbacks,
        }
        path = old_save(
            self.checkpoint_dir, model=self.model, optimizer=self.optimizer, progress=progress
        )
        state = {k: v.clone() for k, v in self.model.state_dict().items()}
        torch.save(state, self.out_dir / f"rank{self.ctx.rank}-step{self.step}.pt")
        return path


def main(spec_file: str, out_dir: str) -> None:
    dist.init_process_group("gloo")  # env:// from torchrun
    spec = JobSpec.model_validate_json(Path(spec_file).read_text())
    assert spec.template is not None
    ctx = ParallelContext(
        dist.get_rank(), dist.get_world_size(), torch.device("cpu"), dist.group.WORLD
    )
    task = build_task(spec.template, spec.hyperparameters)
    trainer = LegacyTrainer(spec, task, ctx, checkpoint_dir=Path(out_dir) / "checkpoints")
    trainer.out_dir = Path(out_dir)
    trainer.run()
    dist.destroy_process_group()
    sys.stdout.flush()  # and leave before the DDP reducer is freed (parallel_driver.py)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
