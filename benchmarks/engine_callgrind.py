"""Instructions of the bare loop and the engine's step, counted by callgrind in one process.

The callgrind run counts only inside `operator.call(...)` (`--toggle-collect=_operator_call`,
CPython's C function behind it, found through the interpreter's symbols) and writes one
profile per call (`--dump-after`), so one process measures several regions in turn. The
relay process is not traced (`--trace-children=no`); the pipe write's kernel work is not
counted either (callgrind counts user-space instructions).

For `benchmarks.engine_overhead --instructions`; the regions are `engine_inprocess`'s.
"""

from __future__ import annotations

import gc
import operator
import os
import re
import site
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmarks.engine_inprocess import REGIONS, RankPipe, Sides, Size, telemetry_steps


def count_instructions(
    size: Size, *, report_every: int, redis_url: str, python: str = sys.executable
) -> dict[str, float]:
    """Instructions per step of each region (`REGIONS`), counted by callgrind in one process.

    Each side runs `report_every` steps: the engine's one report cycle, its report included.
    Also `report_send`: the SDK sending such a report's points (JSON, pipe write) alone.
    """
    sizes = (size.batch, size.hidden, size.layers, report_every)
    totals = _callgrind(python, redis_url, *map(str, sizes))
    if len(totals) != len(REGIONS) or not all(totals):
        raise RuntimeError(f"callgrind counted {totals}: is {python} stripped of its symbols?")
    return {name: total / report_every for name, total in zip(REGIONS, totals, strict=True)}


def count_telemetry_instructions(
    *, report_every: int, redis_url: str, cycles: int = 3, python: str = sys.executable
) -> float:
    """Instructions per step of the engine's telemetry on the rank (`telemetry_steps`, the
    SDK's JSON and pipe write included), counted by callgrind: `cycles` report cycles."""
    steps = report_every * cycles
    totals = _callgrind(python, redis_url, "telemetry", str(steps), str(report_every))
    if len(totals) != 1 or not totals[0]:
        raise RuntimeError(f"callgrind counted {totals}: is {python} stripped of its symbols?")
    return totals[0] / steps


def _callgrind(python: str, *arguments: str) -> list[int]:
    """Totals of each `operator.call` region of `PYTHON -m benchmarks.engine_callgrind ARGS`.

    PYTHON needs its symbols (`_operator_call`): Debian's /usr/bin/python3.11 is stripped, so
    a venv made from it is run under callgrind with another build of the same minor version
    (pyenv's has them) on this venv's packages.
    """
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=_operator_call",
            "--dump-after=_operator_call",
            "--trace-children=no",  # the relay process is the supervisor's, not counted
            f"--callgrind-out-file={tmp}/cg.%p",
            python,
            "-m",
            "benchmarks.engine_callgrind",
            *arguments,
        ]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
        if python != sys.executable:  # this environment's packages, that interpreter
            env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *site.getsitepackages()])
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        assert done.returncode == 0 and "counted" in done.stdout, done.stdout + done.stderr[-3000:]
        dumps = sorted(Path(tmp).glob("cg.*.*"), key=lambda p: int(p.suffix[1:]))
        return [int(_TOTALS.findall(p.read_text())[0]) for p in dumps]


_TOTALS = re.compile(r"^totals: (\d+)$", re.MULTILINE)


def _count_regions(size: Size, steps: int, redis_url: str) -> None:
    """Under callgrind: warm both sides up, then run each region inside `operator.call`."""
    from workers.rank import sdk
    from workers.rank.engine.optim import finite_probe

    with Sides(size, redis_url) as sides:
        trainer, runner = sides.trainer, sides.trainer.runner
        params = trainer.params
        sides.bare_steps(3)  # optimizer state, allocator and first-call costs outside the count
        sides.engine_steps(3, report_every=3)
        first = (trainer.step + trainer.data_offset) * trainer.accum
        rows = _report_rows(steps)
        sdk.report_many(rows[:1])  # first call
        regions: list[tuple[str, Callable[[], object]]] = [
            ("bare", lambda: sides.bare_steps(steps)),
            # `steps` steps, then their one report: the cycle Trainer.run goes through
            ("engine_steps", lambda: sides.engine_steps(steps, report_every=steps + 1)),
            ("engine_report", lambda: trainer._report(False, False)),  # its SDK send included
            ("report_send", lambda: sdk.report_many(rows)),  # that send alone, for the breakdown
            ("grad_norm", lambda: [runner.grad_norm() for _ in range(steps)]),
            ("weight_check", lambda: [finite_probe(params, mixed=False) for _ in range(steps)]),
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


def _report_rows(steps: int) -> list[tuple[int, dict[str, float]]]:
    """Rows like one report's: the engine's 8 per-step metrics, `peak_mem` on the last.

    The values have as many digits as the engine's (clock differences, float32 read-backs).
    """
    import torch

    names = ("lr", "grad_norm", "step_time", "data_time", "compute_time", "optim_time")
    names += ("samples_per_s", "loss")
    values = iter(
        torch.rand(steps * len(names), generator=torch.Generator().manual_seed(0)).tolist()
    )
    rows = [(10_000 + i, {name: next(values) for name in names}) for i in range(steps)]
    rows[-1][1]["peak_mem"] = 123_456_789.0
    return rows


def _count_telemetry(steps: int, report_every: int, redis_url: str) -> None:
    """Under callgrind: the rank's telemetry of `steps` steps, its SDK sends included."""
    with RankPipe(redis_url):
        telemetry_steps(report_every, report_every=report_every)  # first calls
        gc.collect()
        operator.call(lambda: telemetry_steps(steps, report_every=report_every))
    print("counted", flush=True)


if __name__ == "__main__":
    url, *arguments = sys.argv[1:]
    if arguments[0] == "telemetry":
        _count_telemetry(*map(int, arguments[1:3]), url)
    else:
        batch, hidden, layers, steps = map(int, arguments[:4])
        _count_regions(Size(batch, hidden, layers), steps, url)
