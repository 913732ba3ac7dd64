"""NaN policy: `stop` ends the run as diverged; `rollback` restores, skips the batch, halves LR."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from worker_helpers import mlp_spec

from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.errors import Diverged, EngineFailure
from workers.rank.engine.templates import Task, build_task
from workers.rank.engine.train import Trainer


def poisoned(task: Task, at_call: int) -> Task:
    """The task whose loss is NaN once, on its `at_call`-th evaluation."""
    calls = 0
    loss_fn = task.loss_fn

    def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        nonlocal calls
        calls += 1
        value = loss_fn(output, target)
        return value * float("nan") if calls == at_call else value

    task.loss_fn = loss  # type: ignore[assignment]
    return task


def trainer(tmp_path: Path, **spec: Any) -> Trainer:
    job = mlp_spec(hyperparameters={"steps": 30}, checkpoint={"every_steps": 5}, **spec)
    task = poisoned(build_task("mlp", job.hyperparameters), at_call=13)
    return Trainer(job, task, ParallelContext(), checkpoint_dir=tmp_path / "checkpoints")


def test_stop_policy_fails_the_run_as_diverged_naming_the_step(tmp_path: Path) -> None:
    with pytest.raises(Diverged, match=r"^diverged: .*NaN/Inf at step 13"):
        trainer(tmp_path, nan_policy={"action": "stop"}).run()
    saved = {p.name for p in (tmp_path / "checkpoints").iterdir()}
    assert saved == {"step-5", "step-10"}  # step 15 held the NaN: never saved


def test_rollback_restores_the_last_checkpoint_skips_the_batch_and_halves_lr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = trainer(tmp_path, nan_policy={"action": "rollback", "max_rollbacks": 1})
    result = run.run()

    assert result.step == 30 and not result.stopped
    assert (run.rollbacks, run.lr_scale, run.data_offset) == (1, 0.5, 1)
    assert "rolled back to step 10, skipped that batch, lr x0.5" in capsys.readouterr().out
    assert all(torch.isfinite(p).all() for p in run.model.parameters())
    assert run.optimizer.param_groups[0]["lr"] == pytest.approx(0.5 * 0.01)


def test_rollback_gives_up_as_diverged_after_max_rollbacks(tmp_path: Path) -> None:
    with pytest.raises(Diverged, match="after 0 rollbacks"):
        trainer(tmp_path, nan_policy={"action": "rollback", "max_rollbacks": 0}).run()


def test_fp16_on_cpu_is_refused_with_a_reason_naming_the_gpu() -> None:
    spec = mlp_spec(precision="fp16")
    with pytest.raises(EngineFailure, match="fp16 needs a CUDA GPU"):
        Trainer(spec, build_task("mlp", spec.hyperparameters), ParallelContext())
