"""Two gloo ranks resume a checkpoint the old Trainboard wrote (pickled DCP metadata) and go on."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from reference import rank_weights, resume, torchrun, two_rank_mlp

from workers.rank.engine import checkpoint
from workers.rank.engine.optim import build_optimizer
from workers.rank.engine.templates import build_task

pytestmark = pytest.mark.slow  # starts torchrun ranks

STEPS, EVERY = 4, 2


def test_two_ranks_resume_an_old_checkpoint_and_continue_as_if_never_stopped(
    tmp_path: Path,
) -> None:
    spec, old = two_rank_mlp("legacy", steps=STEPS, every=EVERY), tmp_path / "old"
    old.mkdir()
    torchrun(spec, old, driver="legacy_driver.py")  # checkpoints as d80b501 wrote them
    step_2 = old / "checkpoints" / f"step-{EVERY}"
    assert (step_2 / ".metadata").read_bytes()[:1] == b"\x80"  # a pickle, as DCP wrote it
    for shard in ("__0_0.distcp", "__1_0.distcp"):
        assert (step_2 / shard).read_bytes()[:2] == b"PK"  # torch.save archives

    # what the checkpoint holds, read statically, is what the old ranks had
    task = build_task("mlp", spec.hyperparameters)
    hp = spec.hyperparameters
    optimizer = build_optimizer(
        task.model.parameters(), name=hp["optimizer"], lr=hp["lr"], weight_decay=hp["weight_decay"]
    )
    progress = checkpoint.load(step_2, model=task.model, optimizer=optimizer)
    assert progress["step"] == EVERY
    for name, value in rank_weights(old, 0, EVERY).items():
        assert torch.equal(task.model.state_dict()[name], value), name

    # today's engine on two gloo ranks resumes it at step 2 and trains steps 3 and 4
    new = tmp_path / "new"
    resume(spec, new, step_2)
    assert not (new / f"rank0-step{EVERY}.pt").exists()  # it did not start over
    assert (new / "checkpoints" / f"step-{STEPS}" / ".metadata").read_bytes()[:1] == b"{"
    for rank in (0, 1):
        uninterrupted = rank_weights(old, rank, STEPS)
        resumed = rank_weights(new, rank, STEPS)
        for name, value in uninterrupted.items():
            assert torch.equal(resumed[name], value), (rank, name)
