"""The bare loop and the engine's step in one process, for `benchmarks.engine_overhead`.

No DDP here: the gradient all-reduce is the same work on both sides, so the one-process
comparison leaves it out and sees only what the engine adds around a step. Two measures:
alternating wall-clock blocks (as noisy as the machine), and instructions counted by
callgrind (the same count however busy the machine is).

The callgrind run counts only inside `operator.call(...)` (`--toggle-collect=_operator_call`,
CPython's C function behind it, found through the interpreter's symbols) and writes one
profile per call (`--dump-after`), so one process measures several regions in turn. A
region counts the thread that runs it only, so the engine's telemetry publisher is held
(its thread does nothing) and drained on the training thread, inside a region of its own.
"""

from __future__ import annotations

import gc
import operator
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import redis

from workers.contract.protocol import METRICS_STREAM
from workers.telemetry import StreamPublisher

#: callgrind regions, in the order the child measures them
REGIONS = (
    "bare",
    "engine_steps",
    "engine_report",
    "engine_publish",
    "grad_norm",
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


#: the engine's points go here (the SDK's real path, another stream name), deleted after
STREAM = "bench:engine-overhead:metrics"


class HeldPublisher(StreamPublisher):
    """A publisher whose thread does nothing: `drain` sends its items on the caller's thread."""

    def _run(self) -> None:
        return

    def drain(self) -> None:
        while self._flush_one():
            pass


class Sides:
    """The bare loop and a Trainboard Trainer with the same model, data and optimizer settings."""

    def __init__(self, size: Size, *, held: bool = False) -> None:
        import torch
        from torch import nn

        from workers.contract.spec import JobSpec
        from workers.rank import sdk
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
        os.environ.setdefault("TRAINBOARD_ATTEMPT_ID", "999998")  # the SDK publishes for real
        session = sdk._current()
        assert session is not None
        kind = HeldPublisher if held else StreamPublisher
        self.publisher = kind(session.env.redis_url, STREAM, "engine-overhead")
        session._publishers[METRICS_STREAM] = self.publisher
        self._redis_url = session.env.redis_url

    def __enter__(self) -> Sides:
        return self

    def __exit__(self, *_: object) -> None:
        """Stop the publisher, hand the SDK's stream back, delete what was published."""
        from workers.rank import sdk

        self.publisher.close()
        session = sdk._current()
        assert session is not None
        session._publishers.pop(METRICS_STREAM, None)
        redis.Redis.from_url(self._redis_url).delete(STREAM)

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

    def engine_steps_without_norm(self, steps: int) -> None:
        """The engine's steps with a constant for its gradient-norm pass: what that pass costs.

        Not a configuration the engine has (`grad_norm` is a per-step metric and the NaN
        policy checks it); it prices an option to sample it.
        """
        import torch

        runner, constant = self.trainer.runner, torch.tensor(1.0)
        runner.grad_norm = lambda: constant  # type: ignore[method-assign]
        try:
            self.engine_steps(steps)
        finally:
            delattr(runner, "grad_norm")


def telemetry_steps(steps: int, *, report_every: int) -> None:
    """The engine's telemetry for `steps` steps on the training thread, as `Trainer` does it.

    Per step four clock marks, the metric row (8 values, two of them tensors) and its
    buffering; every `report_every` steps the report's flush: one read-back, `peak_mem`,
    and the points queued for the publisher through the SDK. No training.
    """
    import torch

    from workers.rank import sdk
    from workers.rank.engine.metrics import MetricBuffer, StepClock, Value, peak_memory_bytes

    cpu = torch.device("cpu")
    clock, buffer = StepClock(cpu), MetricBuffer(sdk.report_many)
    loss, norm = torch.tensor(1.0), torch.tensor(2.0)
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


def report_every_for(step_seconds: float) -> int:
    """The engine's cadence for steps this long (its `train` module: about every 0.25 s)."""
    from workers.rank.engine.train import REPORT_EVERY, REPORT_SECONDS

    return max(1, min(REPORT_EVERY, int(REPORT_SECONDS / max(step_seconds, 1e-9))))


def alternating_blocks(sides: Sides, *, block: int, blocks: int) -> dict[str, list[float]]:
    """Wall and CPU µs per step of each side, alternating blocks so all see the same machine.

    CPU is the process's (every thread: the engine's publisher thread counts). A third side,
    `no_norm`, is the engine without its gradient-norm pass.
    """
    runs = {
        "bare": sides.bare_steps,
        "engine": sides.engine_steps,
        "no_norm": sides.engine_steps_without_norm,
    }
    out: dict[str, list[float]] = {f"{n}{cpu}": [] for n in runs for cpu in ("", "_cpu")}
    for _ in range(blocks):
        for name, run in runs.items():
            began, began_cpu = time.perf_counter(), time.process_time()
            run(block)
            out[name].append((time.perf_counter() - began) / block * 1e6)
            out[f"{name}_cpu"].append((time.process_time() - began_cpu) / block * 1e6)
    return out


def count_instructions(size: Size, *, report_every: int) -> dict[str, float]:
    """Instructions per step of each region (`REGIONS`), counted by callgrind in one process.

    Each side runs `report_every` steps: the engine's one report cycle, its report included.
    """
    totals = _callgrind(str(size.batch), str(size.hidden), str(size.layers), str(report_every))
    if len(totals) != len(REGIONS) or not all(totals):
        raise RuntimeError(f"callgrind counted {totals}: is the interpreter stripped of symbols?")
    return {name: total / report_every for name, total in zip(REGIONS, totals, strict=True)}


def count_telemetry_instructions(*, report_every: int, cycles: int = 3) -> float:
    """Instructions per step of the engine's telemetry (`telemetry_steps`, then the publisher
    thread's JSON and XADD for those points), counted by callgrind: `cycles` report cycles."""
    steps = report_every * cycles
    totals = _callgrind("telemetry", str(steps), str(report_every))
    if len(totals) != 1 or not totals[0]:
        raise RuntimeError(f"callgrind counted {totals}: is the interpreter stripped of symbols?")
    return totals[0] / steps


def _callgrind(*arguments: str) -> list[int]:
    """Totals of each `operator.call` region of `python -m benchmarks.engine_inprocess ARGS`."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=_operator_call",
            "--dump-after=_operator_call",
            f"--callgrind-out-file={tmp}/cg.%p",
            sys.executable,
            "-m",
            "benchmarks.engine_inprocess",
            *arguments,
        ]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        assert done.returncode == 0 and "counted" in done.stdout, done.stdout + done.stderr[-3000:]
        dumps = sorted(Path(tmp).glob("cg.*.*"), key=lambda p: int(p.suffix[1:]))
        return [int(_TOTALS.findall(p.read_text())[0]) for p in dumps]


_TOTALS = re.compile(r"^totals: (\d+)$", re.MULTILINE)


def _count_regions(size: Size, steps: int) -> None:
    """Under callgrind: warm both sides up, then run each region inside `operator.call`."""
    with Sides(size, held=True) as sides:
        assert isinstance(sides.publisher, HeldPublisher)
        trainer, runner, drain = sides.trainer, sides.trainer.runner, sides.publisher.drain
        sides.bare_steps(3)  # optimizer state, allocator and first-call costs outside the count
        sides.engine_steps(3, report_every=3)
        drain()
        first = (trainer.step + trainer.data_offset) * trainer.accum
        regions: list[tuple[str, Callable[[], object]]] = [
            ("bare", lambda: sides.bare_steps(steps)),
            # `steps` steps, then their one report: the cycle Trainer.run goes through
            ("engine_steps", lambda: sides.engine_steps(steps, report_every=steps + 1)),
            ("engine_report", lambda: trainer._report(False, False)),
            ("engine_publish", drain),  # the publisher thread's work for those points
            ("grad_norm", lambda: [runner.grad_norm() for _ in range(steps)]),
            ("engine_fetch", lambda: [trainer.batches.batch(first + i) for i in range(steps)]),
            ("bare_fetch", lambda: [sides.bare_fetch() for _ in range(steps)]),
        ]
        assert tuple(name for name, _ in regions) == REGIONS
        for name, run in regions:
            if name == "grad_norm":  # gradients to take the norm of, outside the count
                runner.forward_backward([trainer.batches.batch(first)])
            gc.collect()
            operator.call(run)
    print("counted", flush=True)


def _count_telemetry(steps: int, report_every: int) -> None:
    """Under callgrind: the telemetry of `steps` steps and the publisher's work, one region."""
    with Sides(Size(batch=8, hidden=8, layers=2), held=True) as sides:
        assert isinstance(sides.publisher, HeldPublisher)
        drain = sides.publisher.drain
        telemetry_steps(report_every, report_every=report_every)  # first calls
        drain()

        def cycle() -> None:
            telemetry_steps(steps, report_every=report_every)
            drain()  # the publisher thread's work for those points

        gc.collect()
        operator.call(cycle)
    print("counted", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "telemetry":
        _count_telemetry(*map(int, sys.argv[2:4]))
    else:
        batch, hidden, layers, steps = map(int, sys.argv[1:5])
        _count_regions(Size(batch, hidden, layers), steps)
