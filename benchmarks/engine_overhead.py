"""Engine overhead: the same mlp trained bare and by Trainboard, at one model size per run.

    python -m benchmarks.engine_overhead [--ranks 2 --steps 300 --batch 64 --width 256]
        [--repeat 5] [--instructions] [--no-ddp]

1. DDP, `--ranks` processes: a bare torchrun script, then a real attempt through the
   Supervisor (engine, per-step telemetry through each rank's pipe to the supervisor's
   relays and on to a redis-server of the run's own, its reports),
   alternating `--repeat` times. Each side times its training loop in rank 0 (wall clock and
   the process's CPU seconds); the engine's final checkpoint, which the bare script does not
   write, is timed by the engine and subtracted. Median and range of each, and per pair.
2. One process, no DDP (`benchmarks.engine_inprocess`): alternating blocks of one report
   cycle of steps each, wall and CPU per step.
3. `--instructions`: the same two sides in one process under callgrind, instructions per
   step, with the engine's extra work broken down. Slow (callgrind runs ~2,000x slower on
   this model) but the count does not depend on what else the machine is doing.
4. The engine's per-step telemetry alone (clock marks, metric row, the SDK's JSON and
   pipe write), and the relay process's CPU for those points (the supervisor's work).

In 2-4 this process is the rank: the SDK writes to a pipe read by a real TelemetryRelay
in a child process (`benchmarks.relay_sink`), which publishes to that redis-server.

Both sides use the engine's optimizer settings (AdamW, the spec's lr and weight decay 0).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterable
from pathlib import Path

from benchmarks.engine_inprocess import (
    RankPipe,
    Sides,
    Size,
    alternating_blocks,
    count_instructions,
    count_telemetry_instructions,
    report_every_for,
    telemetry_steps,
)
from benchmarks.own_redis import own_redis
from workers.contract import run_layout
from workers.contract.spec import JobSpec

BARE = textwrap.dedent(
    """
    import os, sys, time, torch, torch.distributed as dist
    from torch import nn
    from workers.rank.engine.templates.mlp import make_data  # the engine's data, not its loop
    steps, batch, hidden, layers, features, classes, count, seed = map(int, sys.argv[1:9])
    lr, weight_decay = map(float, sys.argv[9:11])
    dist.init_process_group("gloo")
    torch.manual_seed(seed)
    blocks = [nn.Sequential(nn.Linear(features, hidden), nn.GELU())]
    blocks += [nn.Sequential(nn.Linear(hidden, hidden), nn.GELU()) for _ in range(layers - 2)]
    blocks.append(nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, classes)))
    model = nn.parallel.DistributedDataParallel(nn.Sequential(*blocks))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    inputs, targets = make_data(seed=seed, size=count, features=features, classes=classes)
    loss_fn = nn.CrossEntropyLoss()
    began, began_cpu = time.perf_counter(), time.process_time()
    for step in range(steps):
        index = torch.randint(0, count, (batch,))
        loss = loss_fn(model(inputs[index]), targets[index])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    seconds, cpu = time.perf_counter() - began, time.process_time() - began_cpu
    if dist.get_rank() == 0:
        print(f"training loop {seconds:.4f} s; cpu {cpu:.4f} s", flush=True)
    dist.destroy_process_group()
    # as the engine leaves (workers/rank/engine/__main__.py `_exit`): gloo's teardown in the
    # destructors aborted a rank now and then ("terminate called without an active exception")
    sys.stdout.flush()
    os._exit(0)
    """
)
LOOP = re.compile(r"training loop (\d+\.\d+) s")
CPU = re.compile(r"cpu (\d+\.\d+) s")
CHECKPOINTS = re.compile(r"of which checkpoints (\d+\.\d+) s")
#: wall seconds, CPU seconds (rank 0's process, every thread) of a training loop
Timing = tuple[float, float]
#: µs per step of the engine's telemetry: the rank's wall and CPU, the relay process's CPU
Telemetry = tuple[float, float, float]


def _spec(args: argparse.Namespace, **fields: object) -> JobSpec:
    hp = {"steps": args.steps, "batch_size": args.batch, "hidden": args.hidden}
    return JobSpec.model_validate(
        {"name": "overhead", "template": "mlp", "hyperparameters": {**hp, "layers": args.layers}}
        | fields
    )


def bare(args: argparse.Namespace, workdir: Path) -> Timing:
    """Seconds of the bare script's training loop under torchrun."""
    script = workdir / "bare.py"
    script.write_text(BARE)
    hp = _spec(args).hyperparameters
    sizes = [args.steps, args.batch, args.hidden, args.layers, hp["features"], hp["classes"]]
    sizes += [hp["dataset_size"], hp["seed"], hp["lr"], hp["weight_decay"]]
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


def telemetry_us_per_step(redis_url: str, steps: int = 5_000, *, report_every: int) -> Telemetry:
    """Microseconds per step of the engine's own telemetry: clock marks, the metric row, and
    (every `report_every` steps) the flush that sends every point through the SDK (JSON, one
    pipe write), timed on the training thread; and the relay process's CPU for them.

    A busy pause after each report, not counted, where the training steps would be: with no
    training the loop makes points faster than the relay takes them, and the rank's write
    would wait on a full pipe (`relay_backpressure_us` measures that).
    """
    pipe = RankPipe(redis_url)
    telemetry_steps(report_every, report_every=report_every)  # first calls
    pause = 0.001 + report_every * 30e-6  # the relay's ~15 µs a step, twice over
    began, began_cpu = time.perf_counter(), time.process_time()
    paused = telemetry_steps(steps, report_every=report_every, pause=pause)
    cycles = steps // report_every
    wall = time.perf_counter() - began - cycles * pause
    cpu = time.process_time() - began_cpu - paused
    relay = pipe.close()
    return wall / steps * 1e6, cpu / steps * 1e6, relay.cpu_s / (steps + report_every) * 1e6


def relay_backpressure_us(redis_url: str, steps: int = 5_000, *, report_every: int) -> float:
    """The same loop without pauses: µs per step on the training thread when the rank makes
    points faster than the relay process takes them (the rank's write waits on the pipe)."""
    pipe = RankPipe(redis_url)
    began = time.perf_counter()
    telemetry_steps(steps, report_every=report_every)
    wall = time.perf_counter() - began
    pipe.close()
    return wall / steps * 1e6


def _spread(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}} – {max(values):{fmt}})"


def ddp_rows(args: argparse.Namespace) -> list[tuple[str, str]]:
    """Bare torchrun vs a Supervisor attempt, `--repeat` alternating pairs."""
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
                f"samples/s; cpu ms/step bare {bare_cpu[-1]:.3f}, trainboard {our_cpu[-1]:.3f}",
                file=sys.stderr,
            )
    ddp = f"DDP {args.ranks} ranks, {args.steps} steps, {args.repeat} alternating pairs"
    return [
        (f"{ddp}: bare torchrun script, samples/s", _spread(bare_rates, ",.0f")),
        (f"{ddp}: Trainboard engine + telemetry, samples/s", _spread(our_rates, ",.0f")),
        ("DDP: ratio Trainboard / bare (throughput), per pair", _spread(ratios, ".3f")),
        ("DDP: bare, rank 0 CPU ms per step", _spread(bare_cpu, ".3f")),
        ("DDP: Trainboard, rank 0 CPU ms per step", _spread(our_cpu, ".3f")),
        ("DDP: ratio bare / Trainboard (CPU per step), per pair", _spread(cpu_ratios, ".3f")),
        ("DDP: final checkpoint (excluded above), ms", _spread(saves, ".0f")),
    ]


def inprocess_rows(sides: Sides, *, blocks: int) -> tuple[list[tuple[str, str]], int]:
    """One process: alternating blocks of one report cycle each; and that cycle's steps.

    Denormals are flushed to zero on both sides here: as this small task's loss approaches
    zero, gradients turn denormal and each float op on them slows down many times, on each
    side at a different step, which swamped the difference being measured.
    """
    import torch

    torch.set_flush_denormal(True)
    sides.engine_steps(5)  # first calls, and the engine's first report sets its cadence
    began = time.perf_counter()
    sides.engine_steps(10)
    every = report_every_for((time.perf_counter() - began) / 10)
    times = alternating_blocks(sides, block=every, blocks=blocks)
    torch.set_flush_denormal(False)
    pairs = zip(times["bare"], times["engine"], strict=True)
    cpu_pairs = zip(times["bare_cpu"], times["engine_cpu"], strict=True)
    no_norm = _spread(times["no_norm_cpu"], ",.0f")
    no_norm_pairs = zip(times["bare_cpu"], times["no_norm_cpu"], strict=True)
    one = f"one process, {blocks} alternating blocks of {every} steps"
    return [
        (f"{one}: bare step, wall µs", _spread(times["bare"], ",.0f")),
        (f"{one}: engine step, wall µs", _spread(times["engine"], ",.0f")),
        ("one process: ratio bare / engine (wall per step), per block pair", _ratio(pairs)),
        ("one process: bare step, CPU µs (all threads)", _spread(times["bare_cpu"], ",.0f")),
        ("one process: engine step, CPU µs (all threads)", _spread(times["engine_cpu"], ",.0f")),
        ("one process: ratio bare / engine (CPU per step), per block pair", _ratio(cpu_pairs)),
        ("one process: engine, its grad-norm pass a constant, CPU µs", no_norm),
        ("one process: ratio bare / that engine (CPU per step), per block", _ratio(no_norm_pairs)),
    ], every


def _ratio(pairs: Iterable[tuple[float, float]]) -> str:
    return _spread([b / e for b, e in pairs], ".3f")


def instruction_rows(
    size: Size, *, report_every: int, redis_url: str, python: str
) -> list[tuple[str, str]]:
    """Instructions per step of both sides and where the engine's extra ones go (the rank's
    work only: the relay process is the supervisor's)."""
    n = count_instructions(size, report_every=report_every, redis_url=redis_url, python=python)
    telemetry = count_telemetry_instructions(
        report_every=report_every, redis_url=redis_url, python=python
    )
    engine = n["engine_steps"] + n["engine_report"]
    cg = f"callgrind, one process, {report_every} steps a side"
    return [
        (f"{cg}: bare step, instructions", f"{n['bare']:,.0f}"),
        (f"{cg}: engine step incl. report and its SDK send, instructions", f"{engine:,.0f}"),
        ("callgrind: ratio bare / engine (instructions per step)", f"{n['bare'] / engine:.4f}"),
        ("callgrind: engine − bare per step", f"{engine - n['bare']:+,.0f}"),
        ("… of which the gradient-norm pass", f"{n['grad_norm']:,.0f}"),
        ("… of which the report (read-back, vote, SDK send)", f"{n['engine_report']:,.0f}"),
        ("… of which the SDK send alone (JSON, pipe write)", f"{n['report_send']:,.0f}"),
        ("… data fetch: engine / bare (randint + gather)", _pair(n, "engine_fetch", "bare_fetch")),
        (
            "telemetry alone on the rank (marks, row, flush, SDK JSON + write), instructions",
            f"{telemetry:,.0f} ({telemetry / n['bare']:.3%} of the bare step)",
        ),
    ]


def _pair(n: dict[str, float], a: str, b: str) -> str:
    return f"{n[a]:,.0f} / {n[b]:,.0f}"


def main() -> None:
    """Run the comparisons for one model size and print one markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    for name, default in (("ranks", 2), ("steps", 300), ("batch", 64), ("layers", 4)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--width", "--hidden", dest="hidden", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--blocks", type=int, default=10, help="one-process block pairs")
    parser.add_argument("--instructions", action="store_true", help="count with callgrind")
    parser.add_argument("--no-ddp", dest="ddp", action="store_false", help="one process only")
    parser.add_argument(
        "--report-every", type=int, help="steps per report cycle (default: as the engine sets it)"
    )
    parser.add_argument(
        "--callgrind-python",
        default=sys.executable,
        help="interpreter run under callgrind, with its symbols (e.g. pyenv's 3.11)",
    )
    args = parser.parse_args()
    size = Size(args.batch, args.hidden, args.layers)
    with own_redis() as args.redis_url:
        rows = ddp_rows(args) if args.ddp else []
        # progress lines to nowhere
        with Sides(size, args.redis_url) as sides, contextlib.redirect_stdout(io.StringIO()):
            one, every = inprocess_rows(sides, blocks=args.blocks)
        every = args.report_every or every
        relay = sides.pipe.stats
        assert relay is not None and not relay.refused, relay
        runs = [telemetry_us_per_step(args.redis_url, report_every=every) for _ in range(3)]
        burst = [relay_backpressure_us(args.redis_url, report_every=every) for _ in range(3)]
        rows += one
        if args.instructions:
            python = args.callgrind_python
            rows += instruction_rows(
                size, report_every=every, redis_url=args.redis_url, python=python
            )
    on = f"telemetry per step, a report every {every} steps"
    rows += [
        (f"{on}: on the training thread, wall µs", _spread([r[0] for r in runs], ".1f")),
        (f"{on}: rank's CPU µs", _spread([r[1] for r in runs], ".1f")),
        (f"{on}: relay process's CPU µs (supervisor side)", _spread([r[2] for r in runs], ".1f")),
        (f"{on}: training thread, no pauses (waits on the relay), µs", _spread(burst, ".1f")),
        (
            "relay process over the one-process blocks: CPU µs per point",
            f"{relay.cpu_us_per_point():.2f} ({relay.points:,} points)",
        ),
    ]
    print(f"| mlp {args.layers} blocks, {size.label()} per rank | median (min – max) |")
    print("|---|---|")
    for label, value in rows:
        print(f"| {label} | {value} |")


if __name__ == "__main__":
    main()
