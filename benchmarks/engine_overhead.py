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
    began = time.perf_counter()
    for step in range(steps):
        index = torch.randint(0, 4096, (batch,))
        loss = loss_fn(model(inputs[index]), targets[index])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    seconds = time.perf_counter() - began
    if dist.get_rank() == 0:
        print(f"training loop {seconds:.4f} s", flush=True)
    dist.destroy_process_group()
    """
)
LOOP = re.compile(r"training loop (\d+\.\d+) s")
CHECKPOINTS = re.compile(r"of which checkpoints (\d+\.\d+) s")


def bare(args: argparse.Namespace, workdir: Path) -> float:
    """Seconds of the bare script's training loop under torchrun."""
    script = workdir / "bare.py"
    script.write_text(BARE)
    sizes = [args.steps, args.batch, args.hidden, args.layers, 16, 4]
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        + [f"--nproc-per-node={args.ranks}", str(script), *map(str, sizes)],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    match = LOOP.search(done.stdout)
    assert match, done.stdout + done.stderr
    return float(match.group(1))


def trainboard(args: argparse.Namespace, workdir: Path) -> tuple[float, float]:
    """Seconds of the engine's training loop in a real attempt, without and of checkpoints."""
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
    match, saving = LOOP.search(log), CHECKPOINTS.search(log)
    assert match and saving, log
    return float(match.group(1)) - float(saving.group(1)), float(saving.group(1))


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
    bare_rates, our_rates, ratios, saves = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            bare_rate = samples / bare(args, Path(tmp))
            loop, saving = trainboard(args, Path(tmp) / str(i))
            bare_rates.append(bare_rate)
            our_rates.append(samples / loop)
            ratios.append(samples / loop / bare_rate)
            saves.append(saving * 1000)
            print(
                f"repeat {i + 1}: bare {bare_rate:,.0f}, trainboard {samples / loop:,.0f} samples/s"
            )
    print(f"| run ({args.repeat} alternating repeats) | median (min – max) |")
    print("|---|---|")
    print(f"| bare torchrun script (DDP), samples/s | {_spread(bare_rates, ',.0f')} |")
    print(f"| Trainboard engine + telemetry, samples/s | {_spread(our_rates, ',.0f')} |")
    print(f"| ratio Trainboard / bare, per pair | {_spread(ratios, '.3f')} |")
    print(f"| final checkpoint (excluded above), ms | {_spread(saves, '.0f')} |")
    telemetry = [telemetry_us_per_step() for _ in range(3)]
    print(f"| telemetry per step per rank, µs | {_spread(telemetry, '.1f')} |")


if __name__ == "__main__":
    main()
