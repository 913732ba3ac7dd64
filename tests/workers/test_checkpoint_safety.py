"""Loading a checkpoint never unpickles arbitrary objects: a crafted one is refused, inert."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
import torch
from worker_helpers import mlp_spec

from workers.rank.engine import checkpoint
from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.templates import build_task
from workers.rank.engine.train import Trainer


class Exploit:
    """Unpickling this would run a shell command."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


def test_crafted_metadata_pickle_is_refused_without_running_it(tmp_path: Path) -> None:
    spec = mlp_spec(hyperparameters={"steps": 2})
    trainer = Trainer(
        spec,
        build_task("mlp", spec.hyperparameters),
        ParallelContext(),
        checkpoint_dir=tmp_path / "checkpoints",
    )
    trainer.train_step()
    path = trainer.save()
    assert path is not None
    marker = tmp_path / "pwned"
    (path / ".metadata").write_bytes(pickle.dumps(Exploit(marker)))

    with pytest.raises(pickle.UnpicklingError, match="may not load"):
        trainer.resume(path)
    with pytest.raises(pickle.UnpicklingError):
        checkpoint.read_progress(path)
    assert not marker.exists()


def test_a_checkpoint_with_list_shaped_optimizer_state_still_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checkpoints from before optimizer state was keyed by parameter name resume as before."""
    spec = mlp_spec(hyperparameters={"steps": 2})

    def trainer() -> Trainer:
        task = build_task("mlp", spec.hyperparameters)
        return Trainer(spec, task, ParallelContext(), checkpoint_dir=tmp_path / "checkpoints")

    old = trainer()
    old.train_step()
    with monkeypatch.context() as patch:
        patch.setattr(checkpoint, "_OPTIONS", checkpoint._LEGACY_OPTIONS)
        path = old.save()
    assert path is not None
    saved = checkpoint.SafeReader(path).read_metadata().state_dict_metadata
    assert checkpoint._LEGACY_KEY in saved  # the old shape was written
    new = trainer()
    new.resume(path)
    assert new.step == 1
    for mine, theirs in zip(new.optimizer.param_groups, old.optimizer.param_groups, strict=True):
        assert {k: v for k, v in mine.items() if k != "params"} == {
            k: v for k, v in theirs.items() if k != "params"
        }
    for p_new, p_old in zip(new.params, old.params, strict=True):
        assert torch.equal(p_new, p_old)
        assert torch.equal(
            new.optimizer.state[p_new]["exp_avg"], old.optimizer.state[p_old]["exp_avg"]
        )
