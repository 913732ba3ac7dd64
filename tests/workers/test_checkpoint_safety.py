"""Loading a checkpoint never unpickles arbitrary objects: a crafted one is refused, inert."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
from worker_helpers import mlp_spec

from workers.engine import checkpoint
from workers.engine.distributed import ParallelContext
from workers.engine.templates import build_task
from workers.engine.train import Trainer


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
