"""The data-parallel training loop: DDP, gradient accumulation, LR schedule, checkpoints."""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from workers import sdk
from workers.engine import checkpoint
from workers.engine.data import ShardedBatches
from workers.engine.distributed import ParallelContext
from workers.engine.metrics import MetricBuffer
from workers.engine.optim import build_optimizer, lr_at
from workers.engine.templates import Task
from workers.spec import JobSpec

#: steps between metric read-backs (one device sync each) and progress lines
REPORT_EVERY = 10


@dataclass
class TrainResult:
    """How the loop ended."""

    step: int
    stopped: bool
    last_checkpoint: Path | None
    model: nn.Module


class Trainer:
    """Runs the optimizer steps of one rank; every rank of the gang runs the same loop."""

    def __init__(
        self,
        spec: JobSpec,
        task: Task,
        ctx: ParallelContext,
        *,
        checkpoint_dir: Path | None = None,
        tag: str = "local",
    ) -> None:
        hp = spec.hyperparameters
        self.spec, self.ctx, self.tag = spec, ctx, tag
        self.checkpoint_dir = checkpoint_dir
        self.model = task.model.to(ctx.device)
        self.loss_fn = task.loss_fn
        self.wrapped: nn.Module = self.model
        if ctx.world_size > 1:
            self.wrapped = DistributedDataParallel(
                self.model,
                device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None,
                bucket_cap_mb=spec.parallelism.bucket_cap_mb,
            )
        self.optimizer = build_optimizer(
            self.model.parameters(),
            name=hp["optimizer"],
            lr=hp["lr"],
            weight_decay=hp["weight_decay"],
        )
        self.batches = ShardedBatches(
            task.inputs,
            task.targets,
            batch_size=hp["batch_size"],
            rank=ctx.rank,
            replicas=ctx.world_size,
            seed=hp["seed"],
        )
        self.total_steps = int(hp["steps"])
        self.step = 0
        self.metrics = MetricBuffer(sdk.report)

    def resume(self, path: Path) -> None:
        """Continue from a checkpoint: the next step and its data are the ones that would follow."""
        self.step, _ = checkpoint.load(path, model=self.model, optimizer=self.optimizer)

    def train_step(self) -> None:
        """One optimizer step over grad_accum micro-batches."""
        accum, hp = self.spec.grad_accum, self.spec.hyperparameters
        started = time.perf_counter()
        lr = lr_at(
            self.step + 1,
            peak=hp["lr"],
            total_steps=self.total_steps,
            schedule=self.spec.lr_schedule,
        )
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        loss_sum = torch.zeros((), device=self.ctx.device)
        for micro in range(accum):
            inputs, targets = self.batches.batch(self.step * accum + micro)
            inputs = inputs.to(self.ctx.device, non_blocking=True)
            targets = targets.to(self.ctx.device, non_blocking=True)
            # sync gradients only at the last micro-step: earlier ones just accumulate locally
            last = micro == accum - 1
            no_sync = getattr(self.wrapped, "no_sync", None)
            with contextlib.nullcontext() if last or no_sync is None else no_sync():
                loss = self.loss_fn(self.wrapped(inputs), targets)
                (loss / accum).backward()
            loss_sum += loss.detach()
        params = [p for p in self.model.parameters() if p.grad is not None]
        if self.spec.grad_clip is not None:
            grad_norm = torch.nn.utils.clip_grad_norm_(params, self.spec.grad_clip)
        else:
            grad_norm = torch.nn.utils.get_total_norm(
                [p.grad for p in params if p.grad is not None]
            )
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        # host time: on a GPU it is exact over a REPORT_EVERY window (each flush syncs once)
        elapsed = time.perf_counter() - started
        self.metrics.add(
            self.step,
            loss=loss_sum / accum,
            lr=lr,
            grad_norm=grad_norm,
            step_time=elapsed,
            samples_per_s=hp["batch_size"] * accum / max(elapsed, 1e-9),
        )

    def run(self) -> TrainResult:
        """Train to the last step, or until asked to stop; checkpoint as the spec says."""
        every = self.spec.checkpoint.every_steps
        minutes = self.spec.checkpoint.every_minutes
        last_saved_at, last_path = time.monotonic(), None
        stopped = False
        while self.step < self.total_steps:
            self.train_step()
            if len(self.metrics) >= REPORT_EVERY:
                self._report()
            time_due = minutes is not None and time.monotonic() - last_saved_at >= minutes * 60
            stopped, time_due = self.ctx.agree(sdk.should_stop(), time_due)
            due = time_due or (every is not None and self.step % every == 0)
            if stopped or due or self.step == self.total_steps:
                last_path = self.save()
                last_saved_at = time.monotonic()
            if stopped:
                break
        self._report()
        return TrainResult(self.step, stopped, last_path, self.model)

    def save(self) -> Path | None:
        """Checkpoint the current step (all ranks take part); announce it from rank 0."""
        if self.checkpoint_dir is None:
            return None
        path = checkpoint.save(
            self.checkpoint_dir,
            model=self.model,
            optimizer=self.optimizer,
            step=self.step,
            epoch=self.batches.epoch_of(self.step * self.spec.grad_accum),
            keep_last=self.spec.checkpoint.keep_last,
            tag=self.tag,
        )
        if self.ctx.is_leader:
            sdk.event("checkpoint", message=str(path), step=self.step)
            print(f"checkpoint step {self.step} saved to {path}", flush=True)
        return path

    def _report(self) -> None:
        last = self.metrics.flush()
        if not last:
            return
        if not math.isfinite(last["loss"]) and self.spec.nan_policy.action == "stop":
            raise FloatingPointError(f"loss became {last['loss']} at step {self.step}")
        if self.ctx.is_leader:
            print(
                f"step {self.step}/{self.total_steps} loss {last['loss']:.4f} lr {last['lr']:.4g}",
                flush=True,
            )
