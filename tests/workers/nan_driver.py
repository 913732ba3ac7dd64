"""Under torchrun: parallel_driver's run, where one batch makes rank 1's gradients NaN.

The batch at position POISONED (the data of step POISONED + 1 when nothing was skipped)
turns rank 1's gradients NaN after its backward, and its loss stays finite: the case the
NaN policy sees only in later steps when the gradient norm is not taken every step. Reports
come only at checkpoints (and the first step), so which steps a rollback skips does not
depend on how fast this machine steps.
"""

from __future__ import annotations

import sys

import torch
from parallel_driver import DumpingTrainer, main

from workers.rank.engine import report

#: the poisoned batch: step 13's
POISONED = 12


class PoisonedTrainer(DumpingTrainer):
    """Rank 1's gradients of the poisoned batch are NaN, as an overflow in its backward makes."""

    def _step_optimizer(self) -> torch.Tensor | None:
        if self.ctx.rank == 1 and self.own_step + self.data_offset == POISONED:
            for p in self.params:
                assert p.grad is not None, "every weight has a gradient after the backward"
                p.grad.fill_(float("nan"))
        return super()._step_optimizer()


if __name__ == "__main__":
    report.REPORT_SECONDS = 1e9  # every 100 steps at most: only checkpoints report here
    main(sys.argv[1], sys.argv[2], trainer_class=PoisonedTrainer)
