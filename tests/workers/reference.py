"""A single-process reference: the whole model trained on the union of every replica's batches."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from workers.contract.spec import JobSpec
from workers.rank.engine.data import ShardedBatches
from workers.rank.engine.optim import build_optimizer, lr_at
from workers.rank.engine.templates import build_task

ROOT = Path(__file__).resolve().parents[2]


def reference_weights(
    spec: JobSpec,
    steps: int | None = None,
    *,
    skipped: frozenset[int] = frozenset(),
    lr_scale_after: tuple[int, float] = (0, 1.0),
) -> dict[str, torch.Tensor]:
    """Weights after `steps` optimizer steps on the global batches a parallel run would see.

    `skipped`: batch positions (one optimizer step's each) never trained on, as a NaN
    rollback skips them; `lr_scale_after` (step, scale): the learning rate of every step
    after that one is scaled, as a rollback to that step halves it.
    """
    assert spec.template is not None
    hp, dp = spec.hyperparameters, spec.parallelism.data_parallel_degree
    task = build_task(spec.template, hp)
    model = task.model
    optimizer = build_optimizer(
        model.parameters(), name=hp["optimizer"], lr=hp["lr"], weight_decay=hp["weight_decay"]
    )
    shards = [
        ShardedBatches(
            task.inputs,
            task.targets,
            batch_size=hp["batch_size"],
            rank=r,
            replicas=dp,
            seed=hp["seed"],
        )
        for r in range(dp)
    ]
    accum, position = spec.grad_accum, -1
    after, scale = lr_scale_after
    for step in range(hp["steps"] if steps is None else steps):
        position += 1
        while position in skipped:
            position += 1
        parts = [shard.batch(position * accum + i) for shard in shards for i in range(accum)]
        inputs = torch.cat([x for x, _ in parts])
        targets = torch.cat([y for _, y in parts])
        for group in optimizer.param_groups:
            group["lr"] = (scale if step >= after else 1.0) * lr_at(
                step + 1, peak=hp["lr"], total_steps=hp["steps"], schedule=spec.lr_schedule
            )
        task.loss_fn(model(inputs), targets).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.grad_clip or float("inf"))
        optimizer.step()
        optimizer.zero_grad()
    return model.state_dict()


def small_mlp(steps: int) -> dict[str, int]:
    """Hyperparameters of the small MLP the equivalence tests train for `steps` steps."""
    return {"steps": steps, "batch_size": 8, "dataset_size": 160, "hidden": 32, "layers": 3}


def two_rank_mlp(name: str, *, steps: int, every: int, **fields: object) -> JobSpec:
    """Two data-parallel ranks of the small mlp for `steps` steps, a checkpoint every `every`;
    `fields`: more of the spec's own."""
    return JobSpec.model_validate(
        {
            "name": name,
            "template": "mlp",
            "parallelism": {"strategy": "data", "devices": 2},
            "hyperparameters": small_mlp(steps),
            "checkpoint": {"every_steps": every},
            **fields,
        }
    )


def resume(spec: JobSpec, out_dir: Path, checkpoint: Path) -> None:
    """Train spec again under torchrun into a new out_dir, resuming from checkpoint."""
    out_dir.mkdir()
    (out_dir / "resume-from").write_text(str(checkpoint))
    torchrun(spec, out_dir)


def torchrun(
    spec: JobSpec, out_dir: Path, *, nproc: int | None = None, driver: str = "parallel_driver.py"
) -> str:
    """Train spec on CPU ranks under torchrun with tests/workers/parallel_driver.py or `driver`;
    the ranks' standard output."""
    spec_file = out_dir / "spec.json"
    spec_file.write_text(spec.model_dump_json())
    driver_file = Path(__file__).with_name(driver)
    program = (str(driver_file), str(spec_file), str(out_dir))
    done = run_ranks(nproc or spec.parallelism.devices, *program, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def run_ranks(nproc: int, *program: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`program` (a script and its arguments) as `nproc` ranks under torchrun --standalone (it
    picks its own free port: no race with other runs), the checkout importable, one thread a
    rank; its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        + ["--nproc-per-node", str(nproc), *program],
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        timeout=timeout,
        capture_output=True,
        text=True,
    )


def rank_weights(out_dir: Path, rank: int, step: int) -> dict[str, torch.Tensor]:
    """What parallel_driver.py dumped for a rank at a checkpointed step."""
    return torch.load(out_dir / f"rank{rank}-step{step}.pt", weights_only=True)
