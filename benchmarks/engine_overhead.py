"""Engine overhead: the same DDP mlp run by a bare torchrun script and by Trainboard.

    python -m benchmarks.engine_overhead [--ranks 2 --steps 300 --batch 64 --hidden 256]

Trainboard's run is a real attempt through the Supervisor (engine, per-step telemetry to
Redis at TRAINBOARD_REDIS_URL, the per-step stop vote, one final checkpoint excluded from
the timed loop). Both sides time their training loop only, in the ranks themselves.
"""

from __future__ import annotations

import argparse
import os
import re
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


def trainboard(args: argparse.Namespace, workdir: Path) -> float:
    """Seconds of the engine's training loop in a real attempt."""
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
    match = LOOP.search(log)
    assert match, log
    return float(match.group(1))


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


def main() -> None:
    """Run both sides `--repeat` times, alternating, and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    for name, default in (("ranks", 2), ("steps", 300), ("batch", 64), ("hidden", 256)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    samples = args.steps * args.batch * args.ranks
    best = {"bare": float("inf"), "trainboard": float("inf")}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            best["bare"] = min(best["bare"], bare(args, Path(tmp)))
            best["trainboard"] = min(best["trainboard"], trainboard(args, Path(tmp) / str(i)))
    bare_rate, ours = samples / best["bare"], samples / best["trainboard"]
    print(f"| run | samples/s (best of {args.repeat}) |")
    print("|---|---|")
    print(f"| bare torchrun script (DDP) | {bare_rate:,.0f} |")
    print(f"| Trainboard engine + telemetry | {ours:,.0f} |")
    print(f"| ratio Trainboard / bare | {ours / bare_rate:.3f} |")
    print(f"| telemetry per step per rank | {telemetry_us_per_step():.1f} µs |")


if __name__ == "__main__":
    main()
