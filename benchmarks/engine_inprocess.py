"""The bare loop and the engine's step in one process, for `benchmarks.engine_overhead`.

No DDP here: the gradient all-reduce is the same work on both sides, so the one-process
comparison leaves it out and sees only what the engine adds around a step. Two measures:
alternating wall-clock blocks (as noisy as the machine), and instructions counted by
callgrind (the same count however busy the machine is).

This process is the rank: the SDK encodes each report as JSON and writes it to its
telemetry pipe on the training thread, as in an attempt. The pipe's other end is a real
`TelemetryRelay` publishing to Redis in another process (`benchmarks.relay_sink`), as the
supervisor runs it; that process's CPU is measured apart, never counted as the rank's.

Instructions are counted in `benchmarks.engine_callgrind`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis

from benchmarks.relay_sink import ATTEMPT_ID, RelayProcess, RelayStats
from workers.contract.rank_env import TELEMETRY_FD_VARIABLE

#: callgrind regions, in the order the child measures them
REGIONS = (
    "bare",
    "engine_steps",
    "engine_report",
    "report_send",
    "grad_norm",
    "weight_check",
    "engine_fetch",
    "bare_fetch",
)


@dataclass(frozen=True)
class Size:
    """The model and batch both sides train: the template `mlp` and the same mlp by hand."""

    batch: int
    hidden: int
    layers: int

    def label(self) -> str:
        return f"width {self.hidden}, batch {self.batch}"


#: the relay publishes the engine's points here (not the real metrics stream), deleted after
STREAM = "bench:engine-overhead:metrics"


class RankPipe:
    """This process as a rank: the SDK's channel writes to a relay process's pipe."""

    def __init__(self, redis_url: str) -> None:
        from workers.rank import sdk
        from workers.rank.channel import TelemetryChannel

        self._redis_url = redis_url
        self.relay = RelayProcess(redis_url, STREAM)
        fd = self.relay.fds[0]
        self._environ = {
            k: os.environ.get(k) for k in ("TRAINBOARD_ATTEMPT_ID", TELEMETRY_FD_VARIABLE)
        }
        os.environ["TRAINBOARD_ATTEMPT_ID"] = str(ATTEMPT_ID)
        os.environ[TELEMETRY_FD_VARIABLE] = str(fd)  # as the supervisor sets it for a rank
        session = sdk._current()
        assert session is not None
        # a session made before (an earlier RankPipe in this process) held another pipe
        self.channel = session.channel = TelemetryChannel(fd)
        #: the relay process's work, once closed
        self.stats: RelayStats | None = None

    def __enter__(self) -> RankPipe:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> RelayStats:
        """Close the rank's end, wait until the relay has published all, delete the streams."""
        self.channel.close()
        self.stats = self.relay.finish()
        for name, value in self._environ.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        redis.Redis.from_url(self._redis_url).delete(STREAM, f"{STREAM}:events")
        return self.stats


class Sides:
    """The bare loop and a Trainboard Trainer with the same model, data and optimizer settings."""

    def __init__(self, size: Size, redis_url: str) -> None:
        import torch
        from torch import nn

        from workers.contract.spec import JobSpec
        from workers.rank.engine.distributed import ParallelContext
        from workers.rank.engine.templates import build_task
        from workers.rank.engine.templates.mlp import make_model
        from workers.rank.engine.train import Trainer

        torch.set_num_threads(1)
        hp = {
            "steps": 10**7,
            "batch_size": size.batch,
            "hidden": size.hidden,
            "layers": size.layers,
        }
        spec = JobSpec.model_validate({"name": "bench", "template": "mlp", "hyperparameters": hp})
        hp = spec.hyperparameters
        self.trainer = Trainer(spec, build_task("mlp", hp), ParallelContext())
        torch.manual_seed(hp["seed"])  # the engine's initial weights too
        model = make_model(hp["features"], size.hidden, size.layers, hp["classes"])
        # the engine's optimizer settings (the spec's defaults): AdamW's own default weight
        # decay (0.01) would give the bare side an extra pass over every parameter
        self.optimizer = torch.optim.AdamW(
            model.parameters(), lr=hp["lr"], weight_decay=hp["weight_decay"]
        )
        # the engine's own data: on the same task both sides' losses fall alike (on random
        # labels the bare loss never would, and falling losses change the float work)
        inputs, targets = self.trainer.task.inputs, self.trainer.task.targets
        count = len(inputs)
        loss_fn = nn.CrossEntropyLoss()

        def fetch() -> tuple[torch.Tensor, torch.Tensor]:
            index = torch.randint(0, count, (size.batch,))
            return inputs[index], targets[index]

        def bare_step() -> None:
            x, y = fetch()
            loss_fn(model(x), y).backward()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)

        self.bare_fetch, self.bare_step = fetch, bare_step
        self.pipe = RankPipe(redis_url)  # the engine's reports go through the real path

    def __enter__(self) -> Sides:
        return self

    def __exit__(self, *_: object) -> None:
        """Close the rank's pipe; the relay's stats are then `pipe.stats`."""
        self.pipe.close()

    def bare_steps(self, steps: int) -> None:
        for _ in range(steps):
            self.bare_step()

    def engine_steps(self, steps: int, report_every: int | None = None) -> None:
        """Steps as `Trainer.run` takes them, with reports (`report_every` pins their cadence)."""
        trainer = self.trainer
        for _ in range(steps):
            trainer.train_step()
            if len(trainer.metrics) >= (report_every or trainer.report_every):
                trainer._report(False, False)

    def engine_steps_without_norm(self, steps: int, report_every: int | None = None) -> None:
        """The engine's steps without its gradient-norm passes and weight checks between
        reports: what they cost (every `GRAD_NORM_EVERY` steps, as the engine takes them).

        Not a configuration the engine has (the NaN policy needs the checks); the report's
        own weight check stays.
        """
        from workers.rank.engine import train

        every, train.GRAD_NORM_EVERY = train.GRAD_NORM_EVERY, 2**62
        try:
            self.engine_steps(steps, report_every)
        finally:
            train.GRAD_NORM_EVERY = every


def telemetry_steps(steps: int, *, report_every: int, pause: float = 0.0) -> float:
    """The engine's telemetry for `steps` steps on the training thread, as `Trainer` does it.

    Per step four clock marks, the metric row (8 values, two of them tensors) and its
    buffering; every `report_every` steps the report's flush: one read-back, `peak_mem`,
    and the points sent through the SDK (JSON, one write to the pipe). No training.

    `pause`: seconds to spin after each report, where training would be (the relay then
    keeps up, as it does with real steps); returns the CPU seconds those pauses took.
    """
    import torch

    from workers.rank import sdk
    from workers.rank.engine.metrics import MetricBuffer, StepClock, Value, peak_memory_bytes

    cpu = torch.device("cpu")
    clock, buffer = StepClock(cpu), MetricBuffer(sdk.report_many)
    loss, norm = torch.tensor(1.0), torch.tensor(2.0)
    paused = 0.0
    for step in range(steps):
        a, b, c, d = clock.mark(), clock.mark(), clock.mark(), clock.mark()
        row: dict[str, Value] = dict(
            lr=0.1,
            grad_norm=norm,
            step_time=clock.between(a, d),
            data_time=clock.between(a, b),
            compute_time=clock.between(b, c),
            optim_time=clock.between(c, d),
            samples_per_s=1.0,
            loss=loss,
        )
        buffer.add(step, row)
        if len(buffer) >= report_every:
            buffer.flush(peak_mem=peak_memory_bytes(cpu))
            if pause:
                paused += _spin(pause)
    return paused


def _spin(seconds: float) -> float:
    """Keep the core busy for `seconds`, as a training step would (a sleep would leave the
    caches cold and add a wake-up to the next step); the CPU seconds this took."""
    began, began_cpu = time.perf_counter(), time.process_time()
    while time.perf_counter() - began < seconds:
        pass
    return time.process_time() - began_cpu


def report_every_for(step_seconds: float) -> int:
    """The engine's cadence for steps this long (its `train` module: about every 0.25 s)."""
    from workers.rank.engine.report import steps_between_reports

    return steps_between_reports(step_seconds)


def alternating_blocks(
    sides: Sides, *, block: int, blocks: int, pinned: bool = False
) -> dict[str, list[float]]:
    """Wall and CPU µs per step of each side, alternating blocks so all see the same machine.

    CPU is the process's (every thread), the rank's; the relay process's is not in it. A third side,
    `no_norm`, is the engine without its gradient-norm passes and weight checks. `pinned`: the
    engine reports once a block (else as often as its step time says, which a loaded machine
    shortens).
    """
    every = block if pinned else None
    runs: dict[str, Callable[[int], None]] = {
        "bare": sides.bare_steps,
        "engine": lambda steps: sides.engine_steps(steps, every),
        "no_norm": lambda steps: sides.engine_steps_without_norm(steps, every),
    }
    out: dict[str, list[float]] = {f"{n}{cpu}": [] for n in runs for cpu in ("", "_cpu")}
    for _ in range(blocks):
        for name, run in runs.items():
            began, began_cpu = time.perf_counter(), time.process_time()
            run(block)
            out[name].append((time.perf_counter() - began) / block * 1e6)
            out[f"{name}_cpu"].append((time.process_time() - began_cpu) / block * 1e6)
    return out
