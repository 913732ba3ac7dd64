"""The DDP side of `benchmarks.engine_overhead`: a bare torchrun script against the engine in
a real attempt, same model, same data, same ranks; wall and rank 0's CPU per step."""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workers.contract import run_layout
from workers.contract.spec import JobSpec

LOOP = re.compile(r"training loop (\d+\.\d+) s")
CPU = re.compile(r"cpu (\d+\.\d+) s")
CHECKPOINTS = re.compile(r"of which checkpoints (\d+\.\d+) s")
#: the bare loop's ranks: the checkout importable, one thread each, gloo on the CPU (no GPU shown)
ENV = os.environ | {
    "OMP_NUM_THREADS": "1",
    "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    "CUDA_VISIBLE_DEVICES": "",
}
#: wall seconds, CPU seconds (rank 0's process, every thread) of a training loop
Timing = tuple[float, float]


def _spec(args: argparse.Namespace, **fields: object) -> JobSpec:
    hp = {"steps": args.steps, "batch_size": args.batch, "hidden": args.hidden}
    return JobSpec.model_validate(
        {"name": "overhead", "template": "mlp", "hyperparameters": {**hp, "layers": args.layers}}
        | fields
    )


def bare(args: argparse.Namespace) -> Timing:
    """Seconds of the bare loop (`benchmarks/bare_mlp.py`) under torchrun, on CPU ranks."""
    hp = _spec(args).hyperparameters
    sizes = [args.steps, args.batch, args.hidden, args.layers, hp["features"], hp["classes"]]
    sizes += [hp["dataset_size"], hp["seed"], hp["lr"], hp["weight_decay"]]
    for attempt in range(3):  # a standalone rendezvous fails now and then on a busy machine
        done = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone"]
            + [f"--nproc-per-node={args.ranks}", "-m", "benchmarks.bare_mlp", *map(str, sizes)],
            env=ENV,
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
    from workers.contract.protocol import AttemptOrder
    from workers.node.settings import WorkerSettings
    from workers.supervisor.attempt import Supervisor

    spec = _spec(args, parallelism={"devices": args.ranks})
    node = WorkerSettings(data_dir=workdir / "data", node_name="bench", redis_url=args.redis_url)
    settings = node.for_supervisor()  # ranks as this user, as `trainboard up` runs them
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
    log = (run_layout.log_dir(settings.data_dir, 1, 1) / "rank-0.stdout.log").read_text()
    line = next(line for line in log.splitlines() if "training loop" in line)
    loop, cpu = LOOP.search(line), CPU.search(line)
    saving = CHECKPOINTS.findall(line)  # wall, then cpu
    assert loop and cpu and len(saving) == 2, log
    wall_saving, cpu_saving = map(float, saving)
    return (float(loop.group(1)) - wall_saving, float(cpu.group(1)) - cpu_saving), wall_saving


def spread(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}} – {max(values):{fmt}})"


def ddp_rows(args: argparse.Namespace) -> list[tuple[str, str]]:
    """Bare torchrun vs a Supervisor attempt, `--repeat` alternating pairs."""
    samples = args.steps * args.batch * args.ranks
    bare_rates, our_rates, ratios, saves, cpu_ratios = [], [], [], [], []
    bare_cpu, our_cpu = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            (wall, cpu) = bare(args)
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
                f"samples/s; cpu ms/step bare {bare_cpu[-1]:.3f}, trainboard {our_cpu[-1]:.3f}",
                file=sys.stderr,
            )
    ddp = f"DDP {args.ranks} ranks, {args.steps} steps, {args.repeat} alternating pairs"
    return [
        (f"{ddp}: bare torchrun script, samples/s", spread(bare_rates, ",.0f")),
        (f"{ddp}: Trainboard engine + telemetry, samples/s", spread(our_rates, ",.0f")),
        ("DDP: ratio Trainboard / bare (throughput), per pair", spread(ratios, ".3f")),
        ("DDP: bare, rank 0 CPU ms per step", spread(bare_cpu, ".3f")),
        ("DDP: Trainboard, rank 0 CPU ms per step", spread(our_cpu, ".3f")),
        ("DDP: ratio bare / Trainboard (CPU per step), per pair", spread(cpu_ratios, ".3f")),
        ("DDP: final checkpoint (excluded above), ms", spread(saves, ".0f")),
    ]
