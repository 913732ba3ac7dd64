"""Under torchrun: train a spec with the engine; dump each rank's weights at every checkpoint."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from workers.contract.spec import JobSpec
from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.templates import build_task
from workers.rank.engine.train import Trainer


class DumpingTrainer(Trainer):
    """A Trainer that also writes this rank's own parameters beside every checkpoint."""

    out_dir: Path

    def save(self) -> Path | None:
        path = super().save()
        state = {k: v.clone() for k, v in self.model.state_dict().items()}
        torch.save(state, self.out_dir / f"rank{self.ctx.rank}-step{self.step}.pt")
        return path


def main(
    spec_file: str, out_dir: str, trainer_class: type[DumpingTrainer] = DumpingTrainer
) -> None:
    dist.init_process_group("gloo")  # env:// from torchrun
    spec = JobSpec.model_validate_json(Path(spec_file).read_text())
    assert spec.template is not None
    ctx = ParallelContext(
        dist.get_rank(),
        dist.get_world_size(),
        torch.device("cpu"),
        dist.group.WORLD,
        pp_size=spec.parallelism.stages,
        servers=spec.parallelism.servers,
    )
    task = build_task(spec.template, spec.hyperparameters)
    trainer = trainer_class(spec, task, ctx, checkpoint_dir=Path(out_dir) / "checkpoints")
    trainer.out_dir = Path(out_dir)
    resume = Path(out_dir) / "resume-from"
    if resume.exists():
        trainer.resume(Path(resume.read_text()))
    trainer.run()
    dist.destroy_process_group()
    # exit before the trainer (and its DDP reducer, holding the gloo group) is freed: that
    # destructor can deadlock on the GIL (see workers/rank/engine/__main__.py `_exit`)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
