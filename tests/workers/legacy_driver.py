"""Under torchrun: train like parallel_driver.py, checkpointing as Trainboard did at d80b501."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from parallel_driver import DumpingTrainer, main

from tests.security.legacy_checkpoint import old_save


class LegacyTrainer(DumpingTrainer):
    """Checkpoints with DCP's stock writer (pickled metadata, torch.save shards)."""

    def save(self) -> Path | None:
        assert self.checkpoint_dir is not None
        path = old_save(
            self.checkpoint_dir,
            model=self.model,
            optimizer=self.optimizer,
            progress=self.progress(),
        )
        state = {k: v.clone() for k, v in self.model.state_dict().items()}
        torch.save(state, self.out_dir / f"rank{self.ctx.rank}-step{self.step}.pt")
        return path


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], LegacyTrainer)
