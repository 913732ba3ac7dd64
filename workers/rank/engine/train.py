"""The training loop for every strategy: accumulation, LR schedule, telemetry, checkpoints, NaN."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from workers.contract.checkpoints import newest_checkpoint
from workers.contract.spec import JobSpec
from workers.rank import sdk
from workers.rank.engine import checkpoint, updates
from workers.rank.engine.data import ShardedBatches
from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.errors import CheckpointNoSpace, Diverged
from workers.rank.engine.metrics import MetricBuffer, StepClock, Value, peak_memory_bytes
from workers.rank.engine.optim import build_optimizer, finite_probe, has_mixed_kinds, lr_at
from workers.rank.engine.parallelize import parallelize
from workers.rank.engine.precision import MixedPrecision
from workers.rank.engine.report import agree, progress_line
from workers.rank.engine.reshape import batch_for
from workers.rank.engine.templates import Task

#: steps between gradient-norm passes (the `grad_norm` metric) without `grad_clip`, which needs
#: one every step; each such step also checks the weights for NaN/Inf. The pass reads every
#: gradient, 2% of a small model's CPU step (docs/benchmarks.md "The gradient-norm pass
#: every N steps"); a NaN rollback skips at most this many batches (docs/engine.md)
GRAD_NORM_EVERY = 10


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
        prune: bool = True,
    ) -> None:
        hp = spec.hyperparameters
        self.spec, self.ctx, self.tag, self.task = spec, ctx, tag, task
        self.checkpoint_dir = checkpoint_dir
        self.precision = MixedPrecision(spec, ctx.device)
        scaler = self.precision.scaler
        self.runner = parallelize(
            task.model,
            task.loss_fn,
            ctx,
            spec=spec,
            autocast=self.precision.autocast,
            scale_loss=scaler.scale if scaler is not None else None,
        )
        self.model = self.runner.model
        #: fixed for the run (walking the module tree every step is measurable on small models)
        self.params = list(self.model.parameters())
        self.mixed = has_mixed_kinds(self.params)
        self.optimizer = build_optimizer(
            self.model.parameters(),
            name=hp["optimizer"],
            lr=hp["lr"],
            weight_decay=hp["weight_decay"],
        )
        self.total_steps = int(hp["steps"])
        #: the job's step (rank 0's under async), and the steps this rank took (its data): the
        #: same but for an async worker, which steps at its own pace
        self.step = self.own_step = 0
        #: batches skipped by rollbacks before `step`, and the batches never to train on again
        #: (positions in the run's data: step index + offset, one optimizer step's batch each)
        self.data_offset, self.skipped = 0, set[int]()
        #: since the last report: each step's (job step, batch position), this rank's weight
        #: checks (job step, sum of the weights), and whether this step takes the norm
        self.used: list[tuple[int, int]] = []
        self.checks: list[tuple[int, torch.Tensor]] = []
        self.measuring = True
        #: the last step whose weights every rank checked finite (the last healthy report)
        self.clean_step = 0
        self.lr_scale, self.rollbacks = 1.0, 0
        self._reshape(hp["batch_size"], spec.grad_accum)
        self.metrics = MetricBuffer(sdk.report_many)
        self.clock = StepClock(ctx.device)
        #: the training loop's seconds and this process's CPU seconds in it (all threads), and
        #: the parts of both spent writing checkpoints
        self.loop_seconds = self.checkpoint_seconds = 0.0
        self.loop_cpu_seconds = self.checkpoint_cpu_seconds = 0.0
        self.report_every = 1  # until the first report has measured a step
        self.resumed_from: Path | None = None  # set by resume()
        self.prune = prune  # delete checkpoints beyond keep_last (else the supervisor does)
        #: seconds this rank waits in each step when the spec makes it the straggler
        straggler = spec.straggler
        self.delay_s = (
            straggler.delay_ms / 1000
            if straggler is not None and straggler.rank == ctx.rank
            else 0.0
        )

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.accum * self.ctx.dp_size

    def _reshape(self, batch_size: int, accum: int) -> None:
        self.batch_size, self.accum = batch_size, accum
        self.batches = ShardedBatches(
            self.task.inputs,
            self.task.targets,
            batch_size=batch_size,
            rank=self.ctx.dp_rank,
            replicas=self.ctx.dp_size,
            seed=self.spec.hyperparameters["seed"],
            # a dedicated server draws no batch: its data (for the epoch count) stays put
            device=None if self.ctx.serves_only else self.ctx.device,
        )

    def resume(self, path: Path) -> None:
        """Continue from a checkpoint: same next step and data, global batch kept on any dp size."""
        self.resumed_from = path  # a rollback before this attempt's own first checkpoint
        saved = checkpoint.read_progress(path)
        if "global_batch" in saved and int(saved["global_batch"]) != self.global_batch:
            self._reshape(
                *batch_for(
                    int(saved["global_batch"]),
                    dp_size=self.ctx.dp_size,
                    max_batch=self.spec.hyperparameters["batch_size"],
                    microbatches=self.spec.parallelism.microbatches,
                )
            )
        progress = checkpoint.load(path, model=self.model, optimizer=self.optimizer)
        self.step = self.own_step = int(progress["step"])
        self.data_offset = int(progress.get("data_offset", 0))
        self.lr_scale = progress.get("lr_scale", 1.0)
        self.rollbacks = max(self.rollbacks, int(progress.get("rollbacks", 0)))
        self.clean_step = self.step  # a checkpoint is saved after its weights were checked
        self.used, self.checks = [], []

    def train_step(self, *, meeting: bool = False) -> None:
        """One optimizer step over `accum` micro-batches (`meeting`: a report follows it)."""
        hp = self.spec.hyperparameters
        start = self.clock.mark()
        while self.own_step + self.data_offset in self.skipped:
            self.data_offset += 1  # a rollback skips the batches that may have made a NaN
        position = self.own_step + self.data_offset
        # clipping needs the norm every step; else the metric and the NaN check every N
        checked = (self.own_step + 1) % GRAD_NORM_EVERY == 0
        self.measuring = checked or self.spec.grad_clip is not None
        schedule = self.spec.lr_schedule
        lr = self.lr_scale * lr_at(
            self.step + 1, peak=hp["lr"], total_steps=self.total_steps, schedule=schedule
        )
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        first = position * self.accum
        batches = (
            []
            if self.ctx.serves_only
            else [self.batches.batch(first + i) for i in range(self.accum)]
        )
        fetched = self.clock.mark()
        if self.delay_s:  # spec.straggler: this rank computes as a slower device would
            time.sleep(self.delay_s)
        loss = self.runner.forward_backward(batches)
        computed = self.clock.mark()
        # the update mode's exchange (nothing for pipelines) wraps the optimizer step
        grad_norm, traffic = updates.update(
            self.runner,
            self._step_optimizer,
            step=self.step + 1,
            meeting=meeting,
            measure=self.measuring,
        )
        self.own_step += 1
        self.step = updates.next_step(self.runner, self.step)  # async worker: rank 0's
        self.used.append((self.step, position))
        if checked:  # the weights this step left: a NaN since the last check shows here
            self.checks.append((self.step, finite_probe(self.params, mixed=self.mixed)))
        done = self.clock.mark()
        step_time = self.clock.between(start, done)
        rate = _per_second(self.global_batch, step_time)
        row: dict[str, Value] = dict(
            lr=lr,
            step_time=step_time,
            data_time=self.clock.between(start, fetched),
            compute_time=self.clock.between(fetched, computed),
            optim_time=self.clock.between(computed, done),
            samples_per_s=rate,
            **traffic,
        )
        if grad_norm is not None:
            row["grad_norm"] = grad_norm
        if loss is not None:
            row["loss"] = loss
        if self.task.tokens_per_sample:
            tokens = self.global_batch * self.task.tokens_per_sample
            row["tokens_per_s"] = _per_second(tokens, step_time)
        self.metrics.add(self.step, row)  # an async worker's second row of a step merges

    def _step_optimizer(self) -> torch.Tensor | None:
        scaler, clip = self.precision.scaler, self.spec.grad_clip
        if scaler is not None:
            scaler.unscale_(self.optimizer)
        # one norm pass serves telemetry and clipping; it stays on the device until a report
        grad_norm = self.runner.grad_norm() if self.measuring else None
        if clip is not None:  # it skips parameters without a gradient itself
            assert grad_norm is not None, "clipping measures every step"
            torch.nn.utils.clip_grads_with_norm_(self.params, clip, grad_norm)
        if scaler is not None:
            scaler.step(self.optimizer)
            scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm

    def run(self) -> TrainResult:
        """Train to the last step, or until asked to stop; checkpoint as the spec says."""
        every = self.spec.checkpoint.every_steps
        minutes = self.spec.checkpoint.every_minutes
        last_saved_at, last_path = time.monotonic(), None
        stopped, began, began_cpu = False, time.perf_counter(), time.process_time()
        while self.step < self.total_steps:
            ahead = self.step + 1
            wanted = (
                (every is not None and ahead % every == 0)
                or ahead == self.total_steps
                or len(self.metrics) + 1 >= self.report_every
                # a rank alone needs no one's agreement to stop: it saves and stops at the
                # next step, however long the steps to the next report now take (a gang
                # learns of a stop at its next report: the vote is a collective)
                or (self.ctx.world_size == 1 and sdk.should_stop())
            )
            self.train_step(meeting=wanted)
            if not updates.meeting(self.runner, wanted):  # an async worker's: rank 0's call
                continue
            # every rank reaches this at the same step: the stop and time votes ride on the
            # report's one collective, and a NaN is found before any checkpoint saves it
            time_due = minutes is not None and time.monotonic() - last_saved_at >= minutes * 60
            # async: the ranks catch up with rank 0 and take its step
            self.step = updates.meet(self.runner, self._step_optimizer, step=self.step)
            due = every is not None and self.step % every == 0
            healthy, stopped, time_due = self._report(sdk.should_stop(), time_due)
            if not healthy:
                if stopped:
                    break
                continue  # rolled back to the newest checkpoint: nothing to save now
            if stopped or due or time_due or self.step == self.total_steps:
                last_path = self.save() or last_path  # none for lack of space: the previous
                last_saved_at = time.monotonic()
            if stopped:
                break
        self.loop_seconds = time.perf_counter() - began
        self.loop_cpu_seconds = time.process_time() - began_cpu
        return TrainResult(self.step, stopped, last_path, self.model)

    def progress(self) -> checkpoint.Progress:
        """The numbers a checkpoint keeps beside the weights, to resume exactly here."""
        return {
            "step": self.step,
            "epoch": self.batches.epoch_of((self.step + self.data_offset) * self.accum),
            "global_batch": self.global_batch,
            "data_offset": self.data_offset,
            "lr_scale": self.lr_scale,
            "rollbacks": self.rollbacks,
        }

    def save(self) -> Path | None:
        """Checkpoint the current step (all ranks take part); announce it from rank 0."""
        if self.checkpoint_dir is None:
            return None
        began, began_cpu = time.perf_counter(), time.process_time()
        sdk.phase("checkpoint")  # a hang report then names a stalled save, not the loop
        try:
            updates.settle(self.runner, self.optimizer, step=self.step)  # one state to save
            path = checkpoint.save(
                self.checkpoint_dir,
                model=self.model,
                optimizer=self.optimizer,
                progress=self.progress(),
                keep_last=self.spec.checkpoint.keep_last if self.prune else 0,
                tag=self.tag,
            )
        except CheckpointNoSpace as full:  # costs this checkpoint, or pauses the job
            checkpoint.no_space(
                full, spec=self.spec.checkpoint, step=self.step, leader=self.ctx.is_leader
            )
            return None
        finally:
            sdk.phase("train")
        if self.ctx.is_leader:
            sdk.event("checkpoint", message=str(path), step=self.step)
            print(f"checkpoint step {self.step} saved to {path}", flush=True)
        self.checkpoint_seconds += time.perf_counter() - began
        self.checkpoint_cpu_seconds += time.process_time() - began_cpu
        return path

    def _report(self, stop: bool, time_due: bool) -> tuple[bool, bool, bool]:
        """Publish and check held metrics, agree on stop and time votes with every rank.

        Returns (healthy, stop, time_due); not healthy means it rolled back.
        """
        rows = self.metrics.flush(peak_mem=peak_memory_bytes(self.ctx.device))
        if not self.checks or self.checks[-1][0] != self.step:  # what a checkpoint would save
            self.checks.append((self.step, finite_probe(self.params, mixed=self.mixed)))
        sums = torch.stack([total for _, total in self.checks]).tolist()
        checks = [(step, total) for (step, _), total in zip(self.checks, sums, strict=True)]
        used, self.used, self.checks = self.used, [], []
        votes = agree(
            self.ctx,
            rows,
            has_loss=self.runner.has_loss,
            stop=stop,
            time_due=time_due,
            paced=updates.leads(self.runner),
            checks=checks,
            clean_from=self.clean_step,
        )
        self.report_every = votes.report_every
        if votes.bad_step is not None:
            assert votes.clean_step is not None, "a bad step comes with the last clean one"
            self._on_nonfinite(votes.bad_step, votes.clean_step, used)
            return False, votes.stop, False
        self.clean_step = self.step
        if rows:  # every rank logs (its own log on the job page); the leader's has the loss
            row, total = rows[-1][1], self.total_steps
            line = progress_line(self.ctx, step=self.step, total=total, row=row, loss=votes.loss)
            print(line, flush=True)
        return True, votes.stop, votes.time_due

    def _on_nonfinite(self, bad_step: int, clean_step: int, used: list[tuple[int, int]]) -> None:
        """Stop, or roll back skipping the batches of the steps after `clean_step` up to
        `bad_step` (`used`: each step's batch since the last report)."""
        policy = self.spec.nan_policy
        what = f"the loss or gradients became NaN/Inf at step {bad_step}"
        if clean_step < bad_step - 1:  # the steps between took no norm: any of them may have
            what = (
                f"the loss, gradients or weights became NaN/Inf at step {bad_step} (the weights"
                f" were last checked finite after step {clean_step})"
            )
        if policy.action == "stop":
            raise Diverged(what)
        path = newest_checkpoint(self.checkpoint_dir) if self.checkpoint_dir else None
        path = path or self.resumed_from  # each attempt saves in its own dir
        if path is None:
            raise Diverged(f"{what} and there is no checkpoint to roll back to")
        if self.rollbacks >= policy.max_rollbacks:
            raise Diverged(f"{what} after {self.rollbacks} rollbacks (max_rollbacks)")
        lr_scale, rollbacks = self.lr_scale / 2, self.rollbacks + 1
        # every batch since the last clean step: the bad one is among them, and a NaN that
        # only shows later must not come back on the next try
        self.skipped.update(p for step, p in used if clean_step < step <= bad_step)
        self.resume(path)
        self.lr_scale, self.rollbacks = lr_scale, rollbacks
        if self.ctx.is_leader:
            skipped = (
                "that batch"
                if clean_step == bad_step - 1
                else f"the batches of steps {clean_step + 1}-{bad_step}"
            )
            message = (
                f"{what}: rolled back to step {self.step}, skipped {skipped}, lr x{lr_scale:g}"
            )
            sdk.event("rollback", message=message, step=self.step)
            print(message, flush=True)


def _per_second(amount: float, seconds: float | Callable[[], float]) -> Value:
    if callable(seconds):
        return lambda: amount / max(seconds(), 1e-9)
    return amount / max(seconds, 1e-9)
