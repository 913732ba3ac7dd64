"""Engine overhead: the same DDP mlp run by a bare torchrun script and by Trainboard.

    python -m benchmarks.engine_overhead [--ranks 2 --steps 300 --batch 64 --hidden 256]

Trainboard's run is a real attempt through the Supervisor (engine, per-step telemetry to
Redis at TRAINBOARD_REDIS_URL, the report collective with its stop vote every 10 steps).
Both sides time their training loop only, in rank 0 itself; the engine's one final
checkpoint (which the bare script does not write) is timed by the engine and subtracted,
and printed on its own. Repeats alternate bare / Trainboard; the table gives the median
and the range of each, and of the per-pair ratio.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

BARE = textwrap.dedent(
    """
    import sys, time, torch, torch.distributed as dist
    from torch import nn
    steps, batch, hidden, layers, features, classes = map(int, sys.argv[1:7])
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Linear(features, hidden), nn.GELU())]
    blocks += [nn.Sequential(nn.Linear(hidden, hidden), nn.GELU()) for _ in range(layers - 2)]
    blocks.append(nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, classes)))
    model = nn.parallel.DistributedDataParallel(nn.Sequential(*blocks))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    inputs, targets = torch.randn(4096, features), torch.randint(0, classes, (4096,))
    loss_fn = nn.CrossEntropyLoss()
    began, began_cpu = time.perf_counter(), time.process_time()
    for step in range(steps):
        index = torch.randint(0, 4096, (batch,))
        loss = loss_fn(model(inputs[index]), targets[index])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    seconds, cpu = time.perf_counter() - began, time.process_time() - began_cpu
    if dist.get_rank() == 0:
        print(f"training loop {seconds:.4f} s; cpu {cpu:.4f} s", flush=True)
    dist.destroy_process_group()
    """
)
LOOP = re.compile(r"training loop (\d+\.\d+) s")
CPU = re.compile(r"cpu (\d+\.\d+) s")
CHECKPOINTS = re.compile(r"of which checkpoints (\d+\.\d+) s")
#: wall seconds, CPU seconds (rank 0's process, every thread) of a training loop
Timing = tuple[float, float]


def bare(args: argparse.Namespace, workdir: Path) -> Timing:
    """Seconds of the bare script's training loop under torchrun."""
    script = workdir / "bare.py"
    script.write_text(BARE)
    sizes = [args.steps, args.batch, args.hidden, args.layers, 16, 4]
    for attempt in range(3):  # a standalone rendezvous fails now and then on a busy machine
        done = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone"]
            + [f"--nproc-per-node={args.ranks}", str(script), *map(str, sizes)],
            env={**os.environ, "OMP_NUM_THREADS": "1"},
            capture_output=True,
            text=True,
        )
        if done.returncode == 0:
            break
        print(f"bare run failed (try {attempt + 1}):\n{done.stderr[-1500:]}", file=sys.stderr)
    done.check_returncode()
    match, cpu = LOOP.search(done.stdout), CPU.search(done.stdout)
    assert match and cpu, done.stdout + done.stderr
    return float(match.group(1)), float(cpu.group(1))


def trainboard(args: argparse.Namespace, workdir: Path) -> tuple[Timing, float]:
    """The engine's training loop in a real attempt without its checkpoints; and those (s)."""
    from workers.protocol import AttemptOrder
    from workers.settings import WorkerSettings
    from workers.spec import JobSpec
    from workers.supervisor import Supervisor

    spec = JobSpec.model_validate(
        {
            "name": "overhead",
            "template": "mlp",
            "parallelism": {"devices": args.ranks},
            "hyperparameters": {
                "steps": args.steps,
                "batch_size": args.batch,
                "hidden": args.hidden,
                "layers": args.layers,
            },
        }
    )
    settings = WorkerSettings(data_dir=workdir / "data", node_name="bench")
    order = AttemptOrder(
        attempt_id=int(time.time()) % 1_000_000,
        job_id=1,
        number=1,
        node="bench",
        devices=list(range(args.ranks)),
        master_port=29_000 + os.getpid() % 1000,
        spec=spec,
    )
    outcome = Supervisor(order, settings).run()
    assert outcome.outcome == "succeeded", outcome.reason
    log = (settings.data_dir / "runs/job-1/attempt-1/rank-0.stdout.log").read_text()
    line = next(line for line in log.splitlines() if "training loop" in line)
    loop, cpu = LOOP.search(line), CPU.search(line)
    saving = CHECKPOINTS.findall(line)  # wall, then cpu
    assert loop and cpu and len(saving) == 2, log
    wall_saving, cpu_saving = map(float, saving)
    return (float(loop.group(1)) - wall_saving, float(cpu.group(1)) - cpu_saving), wall_saving


def telemetry_us_per_step(steps: int = 20_000) -> float:
    """Microseconds per step of the engine's own telemetry: clock marks, the metric row, and
    (every 10 steps) the flush that publishes every point to Redis through the SDK."""
    os.environ.setdefault("TRAINBOARD_ATTEMPT_ID", "999999")
    import torch

    from workers import sdk
    from workers.engine.metrics import MetricBuffer, StepClock

    clock, buffer = StepClock(torch.device("cpu")), MetricBuffer(sdk.report)
    loss, norm = torch.tensor(1.0), torch.tensor(2.0)
    began = time.perf_counter()
    for step in range(steps):
        a, b, c, d = clock.mark(), clock.mark(), clock.mark(), clock.mark()
        buffer.add(
            step,
            lr=0.1,
            grad_norm=norm,
            step_time=clock.between(a, d),
            data_time=clock.between(a, b),
            compute_time=clock.between(b, c),
            optim_time=clock.between(c, d),
            samples_per_s=1.0,
            loss=loss,
        )
        if len(buffer) >= 10:
            buffer.flush()
    seconds = time.perf_counter() - began
    sdk.flush()
    return seconds / steps * 1e6


def inprocess_us_per_step(args: argparse.Namespace, block: int = 50, blocks: int = 20) -> tuple:
    """Per-step µs of the bare loop and of the engine's step (with its reports and telemetry)
    in one process (no DDP: communication is the same on both sides), alternating blocks of
    `block` steps so that both see the same machine; medians over the blocks."""
    os.environ.setdefault("TRAINBOARD_ATTEMPT_ID", "999998")
    import torch
    from torch import nn

    from workers.engine.distributed import ParallelContext
    from workers.engine.templates import build_task
    from workers.engine.templates.mlp import make_model
    from workers.engine.train import Trainer
    from workers.spec import JobSpec

    torch.set_num_threads(1)
    hp = {"steps": block * blocks, "batch_size": args.batch, "hidden": args.hidden}
    spec = JobSpec.model_validate(
        {"name": "inprocess", "template": "mlp", "hyperparameters": {**hp, "layers": args.layers}}
    )
    trainer = Trainer(spec, build_task("mlp", spec.hyperparameters), ParallelContext())
    model = make_model(16, args.hidden, args.layers, 4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    inputs, targets = torch.randn(4096, 16), torch.randint(0, 4, (4096,))
    loss_fn = nn.CrossEntropyLoss()

    def bare_block() -> float:
        began = time.perf_counter()
        for _ in range(block):
            index = torch.randint(0, 4096, (args.batch,))
            loss_fn(model(inputs[index]), targets[index]).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return (time.perf_counter() - began) / block * 1e6

    def engine_block() -> float:
        began = time.perf_counter()
        for _ in range(block):
            trainer.train_step()
            if len(trainer.metrics) >= trainer.report_every:
                trainer._report(False, False)
        return (time.perf_counter() - began) / block * 1e6

    bare_us, engine_us = [], []
    for _ in range(blocks):
        bare_us.append(bare_block())
        engine_us.append(engine_block())
    diffs = [e - b for b, e in zip(bare_us, engine_us, strict=True)]
    return statistics.median(bare_us), statistics.median(engine_us), diffs


def _spread(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}} – {max(values):{fmt}})"


def main() -> None:
    """Run both sides `--repeat` times, alternating, and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    for name, default in (("ranks", 2), ("steps", 300), ("batch", 64), ("hidden", 256)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    samples = args.steps * args.batch * args.ranks
    bare_rates, our_rates, ratios, saves, cpu_ratios = [], [], [], [], []
    bare_cpu, our_cpu = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            (wall, cpu) = bare(args, Path(tmp))
            (loop, loop_cpu), saving = trainboard(args, Path(tmp) / str(i))
            bare_rates.append(samples / wall)
            our_rates.append(samples / loop)
            ratios.append(wall / loop)
            saves.append(saving * 1000)
            bare_cpu.append(cpu / args.steps * 1e3)
            our_cpu.append(loop_cpu / args.steps * 1e3)
            cpu_ratios.append(cpu / loop_cpu)
            print(
                f"repeat {i + 1}: bare {samples / wall:,.0f}, trainboard {samples / loop:,.0f} "
                f"samples/s; cpu ms/step bare {bare_cpu[-1]:.3f}, trainboard {our_cpu[-1]:.3f}"
            )
    print(f"| run ({args.repeat} alternating repeats) | median (min – max) |")
    print("|---|---|")
    print(f"| bare torchrun script (DDP), samples/s | {_spread(bare_rates, ',.0f')} |")
    print(f"| Trainboard engine + telemetry, samples/s | {_spread(our_rates, ',.0f')} |")
    print(f"| ratio Trainboard / bare (throughput), per pair | {_spread(ratios, '.3f')} |")
    print(f"| bare, rank 0 CPU ms per step | {_spread(bare_cpu, '.3f')} |")
    print(f"| Trainboard, rank 0 CPU ms per step | {_spread(our_cpu, '.3f')} |")
    print(f"| ratio bare / Trainboard (CPU per step), per pair | {_spread(cpu_ratios, '.3f')} |")
    print(f"| final checkpoint (excluded above), ms | {_spread(saves, '.0f')} |")
    bare_us, engine_us, diffs = inprocess_us_per_step(args)
    print(f"| one process, bare step µs (median of 20 blocks) | {bare_us:.0f} |")
    print(f"| one process, engine step µs (median of 20 blocks) | {engine_us:.0f} |")
    print(f"| one process, engine − bare per block pair, µs | {_spread(diffs, '.0f')} |")
    telemetry = [telemetry_us_per_step() for _ in range(3)]
    print(f"| telemetry per step per rank, µs | {_spread(telemetry, '.1f')} |")


if __name__ == "__main__":
    main()
