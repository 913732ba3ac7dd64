"""Data parallelism computes what one process would: DDP ranks and gradient accumulation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch
from worker_helpers import mlp_spec

from workers.engine.data import ShardedBatches
from workers.engine.distributed import ParallelContext
from workers.engine.optim import build_optimizer, lr_at
from workers.engine.templates import build_task
from workers.engine.train import Trainer
from workers.spec import JobSpec

ROOT = Path(__file__).resolve().parents[2]
#: 12 steps of 2 x 16 samples over 256 samples: the run crosses an epoch boundary (reshuffle)
SPEC = mlp_spec(
    devices=2,
    hyperparameters={"steps": 12, "batch_size": 16, "dataset_size": 256, "optimizer": "adamw"},
    grad_clip=0.5,
    lr_schedule={"kind": "cosine", "warmup_steps": 3},
)


def reference_weights(spec: JobSpec, world: int) -> dict[str, torch.Tensor]:
    """One process training on the union of every rank's micro-batch at each step."""
    hp = spec.hyperparameters
    task = build_task("mlp", hp)
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
            replicas=world,
            seed=hp["seed"],
        )
        for r in range(world)
    ]
    for step in range(hp["steps"]):
        parts = [shard.batch(step) for shard in shards]
        inputs = torch.cat([x for x, _ in parts])
        targets = torch.cat([y for _, y in parts])
        for group in optimizer.param_groups:
            group["lr"] = lr_at(
                step + 1, peak=hp["lr"], total_steps=hp["steps"], schedule=spec.lr_schedule
            )
        task.loss_fn(model(inputs), targets).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.grad_clip or float("inf"))
        optimizer.step()
        optimizer.zero_grad()
    return model.state_dict()


def test_two_ddp_ranks_match_one_process_on_the_same_global_batches(tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(SPEC.model_dump_json())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--standalone",  # torchrun picks its own free port: no race with other tests
            str(Path(__file__).with_name("ddp_driver.py")),
            str(spec_file),
            str(tmp_path),
        ],
        env=env,
        check=True,
        timeout=120,
        capture_output=True,
    )
    rank0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    rank1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    reference = reference_weights(SPEC, world=2)

    assert list(rank0) == list(reference)  # unwrapped: no "module." prefixes
    for name, expected in reference.items():
        assert torch.equal(rank0[name], rank1[name]), f"replicas differ in {name}"
        torch.testing.assert_close(rank0[name], expected, rtol=1e-5, atol=1e-7)
    start = build_task("mlp", SPEC.hyperparameters).model.state_dict()
    assert any(not torch.equal(start[n], rank0[n]) for n in start)  # it did train


def test_accumulating_two_micro_batches_of_b_equals_one_batch_of_2b() -> None:
    def trained(batch_size: int, grad_accum: int) -> dict[str, torch.Tensor]:
        spec = mlp_spec(
            hyperparameters={"steps": 10, "batch_size": batch_size, "dataset_size": 256},
            grad_accum=grad_accum,
            grad_clip=1.0,
        )
        trainer = Trainer(spec, build_task("mlp", spec.hyperparameters), ParallelContext())
        for _ in range(trainer.total_steps):
            trainer.train_step()
        return trainer.model.state_dict()

    accumulated, whole = trained(16, grad_accum=2), trained(32, grad_accum=1)
    for name, expected in whole.items():
        torch.testing.assert_close(accumulated[name], expected, rtol=1e-5, atol=1e-7)
