"""NaN policy: `stop` ends the run as diverged; `rollback` restores, skips the batch, halves LR.

The gradient norm is taken every GRAD_NORM_EVERY steps (each with a check of the weights),
so a NaN is placed exactly only after a checked step; elsewhere the rollback skips every
batch since the last one (tests/workers/test_nan_rollback.py runs that on two ranks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from worker_helpers import mlp_spec

from workers.rank.engine import report
from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.errors import Diverged, EngineFailure
from workers.rank.engine.metrics import MetricBuffer, Row
from workers.rank.engine.report import first_bad, last_clean
from workers.rank.engine.templates import Task, build_task
from workers.rank.engine.train import GRAD_NORM_EVERY, Trainer


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


def trainer(tmp_path: Path, at_call: int = 13, **spec: Any) -> Trainer:
    job = mlp_spec(hyperparameters={"steps": 30}, checkpoint={"every_steps": 5}, **spec)
    task = poisoned(build_task("mlp", job.hyperparameters), at_call=at_call)
    return Trainer(job, task, ParallelContext(), checkpoint_dir=tmp_path / "checkpoints")


def test_stop_policy_fails_the_run_as_diverged_naming_the_step(tmp_path: Path) -> None:
    with pytest.raises(Diverged, match=r"^diverged: .*NaN/Inf at step 13"):
        trainer(tmp_path, nan_policy={"action": "stop"}).run()
    saved = {p.name for p in (tmp_path / "checkpoints").iterdir()}
    assert saved == {"step-5", "step-10"}  # step 15 held the NaN: never saved


def test_rollback_restores_the_last_checkpoint_skips_the_batch_and_halves_lr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # step 11 follows step 10's checked weights (a checkpoint's report, and every 10 steps)
    run = trainer(tmp_path, at_call=11, nan_policy={"action": "rollback", "max_rollbacks": 1})
    result = run.run()

    assert result.step == 30 and not result.stopped
    assert (run.rollbacks, run.lr_scale, run.data_offset) == (1, 0.5, 1)
    said = "NaN/Inf at step 11: rolled back to step 10, skipped that batch, lr x0.5"
    assert said in capsys.readouterr().out
    assert run.skipped == {10}  # step 11's batch, by its position in the data
    assert all(torch.isfinite(p).all() for p in run.model.parameters())
    assert run.optimizer.param_groups[0]["lr"] == pytest.approx(0.5 * 0.01)


def test_rollback_skips_every_batch_since_the_weights_were_last_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report, "REPORT_SECONDS", 1e9)  # reports at checkpoints only
    run = trainer(tmp_path, at_call=13, nan_policy={"action": "rollback", "max_rollbacks": 1})
    result = run.run()

    assert result.step == 30 and (run.rollbacks, run.data_offset) == (1, 3)
    said = (
        "NaN/Inf at step 13 (the weights were last checked finite after step 10): "
        "rolled back to step 10, skipped the batches of steps 11-13, lr x0.5"
    )
    assert said in capsys.readouterr().out
    assert run.skipped == {10, 11, 12}


def test_the_norm_is_a_metric_every_n_steps_and_every_step_with_clipping(
    tmp_path: Path,
) -> None:
    for clip, steps in ((None, [10, 20, 30]), (1.0, list(range(1, 31)))):
        run = trainer(tmp_path / str(clip), at_call=0, grad_clip=clip)  # never poisoned
        published: list[Row] = []
        run.metrics = MetricBuffer(published.extend)  # what the SDK would be handed
        run.run()
        assert GRAD_NORM_EVERY == 10
        assert [step for step, row in published if "grad_norm" in row] == steps
        assert [step for step, _ in published] == list(range(1, 31))


def test_the_first_bad_step_counts_weight_checks_as_well_as_rows() -> None:
    rows = [(s, {"loss": 1.0}) for s in range(11, 16)]
    assert first_bad(rows, [(15, 3.0)]) is None
    assert first_bad(rows, [(15, float("nan"))]) == 15
    rows[3] = (14, {"loss": float("inf")})
    assert first_bad(rows, [(15, float("nan"))]) == 14


def test_the_last_clean_step_is_a_checked_one_or_follows_a_chain_of_norms() -> None:
    plain = [(s, {"loss": 1.0}) for s in range(11, 21)]
    assert last_clean(plain, [], start=10, before=16) == 10
    assert last_clean(plain, [(12, 5.0), (14, 5.0)], start=10, before=16) == 14
    assert last_clean(plain, [(12, 5.0), (16, 5.0)], start=10, before=16) == 12
    normed = [(s, {"loss": 1.0, "grad_norm": 0.5}) for s in range(11, 21)]
    assert last_clean(normed, [], start=10, before=16) == 15  # a norm every step
    gap = normed[:2] + plain[2:3] + normed[3:]  # step 13 took no norm: the chain breaks
    assert last_clean(gap, [], start=10, before=16) == 12


def test_rollback_gives_up_as_diverged_after_max_rollbacks(tmp_path: Path) -> None:
    with pytest.raises(Diverged, match="after 0 rollbacks"):
        trainer(tmp_path, nan_policy={"action": "rollback", "max_rollbacks": 0}).run()


def test_fp16_on_cpu_is_refused_with_a_reason_naming_the_gpu() -> None:
    spec = mlp_spec(precision="fp16")
    with pytest.raises(EngineFailure, match="fp16 needs a CUDA GPU"):
        Trainer(spec, build_task("mlp", spec.hyperparameters), ParallelContext())
