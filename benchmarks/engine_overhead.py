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
import sys
import time
from collections.abc import Iterable

from benchmarks.engine_callgrind import count_instructions, count_telemetry_instructions
from benchmarks.engine_ddp import ddp_rows, spread
from benchmarks.engine_inprocess import (
    RankPipe,
    Sides,
    Size,
    alternating_blocks,
    report_every_for,
    telemetry_steps,
)
from benchmarks.own_redis import own_redis

#: µs per step of the engine's telemetry: the rank's wall and CPU, the relay process's CPU
Telemetry = tuple[float, float, float]


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


def inprocess_rows(
    sides: Sides, *, blocks: int, every: int | None = None
) -> tuple[list[tuple[str, str]], int]:
    """One process: alternating blocks of one report cycle each; and that cycle's steps
    (`every`: pinned, one report a block; else as the engine's step time sets it).

    Denormals are flushed to zero on both sides here: as this small task's loss approaches
    zero, gradients turn denormal and each float op on them slows down many times, on each
    side at a different step, which swamped the difference being measured.
    """
    import torch

    torch.set_flush_denormal(True)
    sides.engine_steps(5)  # first calls, and the engine's first report sets its cadence
    began = time.perf_counter()
    sides.engine_steps(10)
    pinned = every is not None
    every = every or report_every_for((time.perf_counter() - began) / 10)
    times = alternating_blocks(sides, block=every, blocks=blocks, pinned=pinned)
    torch.set_flush_denormal(False)
    pairs = zip(times["bare"], times["engine"], strict=True)
    cpu_pairs = zip(times["bare_cpu"], times["engine_cpu"], strict=True)
    no_norm = spread(times["no_norm_cpu"], ",.0f")
    no_norm_pairs = zip(times["bare_cpu"], times["no_norm_cpu"], strict=True)
    one = f"one process, {blocks} alternating blocks of {every} steps"
    return [
        (f"{one}: bare step, wall µs", spread(times["bare"], ",.0f")),
        (f"{one}: engine step, wall µs", spread(times["engine"], ",.0f")),
        ("one process: ratio bare / engine (wall per step), per block pair", _ratio(pairs)),
        ("one process: bare step, CPU µs (all threads)", spread(times["bare_cpu"], ",.0f")),
        ("one process: engine step, CPU µs (all threads)", spread(times["engine_cpu"], ",.0f")),
        ("one process: ratio bare / engine (CPU per step), per block pair", _ratio(cpu_pairs)),
        ("one process: engine without grad-norm passes and weight checks, CPU µs", no_norm),
        ("one process: ratio bare / that engine (CPU per step), per block", _ratio(no_norm_pairs)),
    ], every


def _ratio(pairs: Iterable[tuple[float, float]]) -> str:
    return spread([b / e for b, e in pairs], ".3f")


def instruction_rows(
    size: Size, *, report_every: int, redis_url: str, python: str
) -> list[tuple[str, str]]:
    """Instructions per step of both sides and where the engine's extra ones go (the rank's
    work only: the relay process is the supervisor's)."""
    from workers.rank.engine.train import GRAD_NORM_EVERY

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
        (
            f"… of which the gradient-norm passes (one every {GRAD_NORM_EVERY} steps; one pass)",
            f"{n['grad_norm'] / GRAD_NORM_EVERY:,.0f} ({n['grad_norm']:,.0f})",
        ),
        (
            f"… of which the weight checks (one every {GRAD_NORM_EVERY} steps; one check)",
            f"{n['weight_check'] / GRAD_NORM_EVERY:,.0f} ({n['weight_check']:,.0f})",
        ),
        ("… of which the report (read-back, vote, SDK send)", f"{n['engine_report']:,.0f}"),
        ("… of which the SDK send alone (JSON, pipe write)", f"{n['report_send']:,.0f}"),
        ("… data fetch: engine / bare (randint + gather)", _pair(n, "engine_fetch", "bare_fetch")),
        (
            "telemetry alone on the rank (marks, row, flush, SDK JSON + write), instructions",
            f"{telemetry:,.0f} ({telemetry / n['bare']:.3%} of the bare step)",
        ),
    ]


def _loads(loads: Iterable[tuple[float, float, float]]) -> str:
    return "; ".join(", ".join(f"{v:.1f}" for v in load) for load in loads)


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
        "--report-every",
        type=int,
        help="steps per report cycle and per one-process block (default: as the engine sets it)",
    )
    parser.add_argument(
        "--callgrind-python",
        default=sys.executable,
        help="interpreter run under callgrind, with its symbols (e.g. pyenv's 3.11)",
    )
    args = parser.parse_args()
    size = Size(args.batch, args.hidden, args.layers)
    began_load = os.getloadavg()
    with own_redis() as args.redis_url:
        rows = ddp_rows(args) if args.ddp else []
        # progress lines to nowhere
        with Sides(size, args.redis_url) as sides, contextlib.redirect_stdout(io.StringIO()):
            one, every = inprocess_rows(sides, blocks=args.blocks, every=args.report_every)
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
        (f"{on}: on the training thread, wall µs", spread([r[0] for r in runs], ".1f")),
        (f"{on}: rank's CPU µs", spread([r[1] for r in runs], ".1f")),
        (f"{on}: relay process's CPU µs (supervisor side)", spread([r[2] for r in runs], ".1f")),
        (f"{on}: training thread, no pauses (waits on the relay), µs", spread(burst, ".1f")),
        (
            "relay process over the one-process blocks: CPU µs per point",
            f"{relay.cpu_us_per_point():.2f} ({relay.points:,} points)",
        ),
    ]
    loads = (began_load, os.getloadavg())
    rows.append(("load average (1, 5, 15 min) at start; at end", _loads(loads)))
    print(f"| mlp {args.layers} blocks, {size.label()} per rank | median (min – max) |")
    print("|---|---|")
    for label, value in rows:
        print(f"| {label} | {value} |")


if __name__ == "__main__":
    main()
