"""Engine overhead on the acceptance machine: a bare torchrun loop vs a Trainboard job.

The same mlp (the template's model and data, the same seed, AdamW with the spec's lr and
weight decay 0) trained by the bare torchrun loop `benchmarks/bare_mlp.py` on one device
(cuda:0 under NCCL, or a CPU under gloo in the dry run) and by a job submitted through the API
on the same device.
Each side times its own training loop in rank 0; the engine's checkpoints are timed by the
engine and subtracted (the bare script writes none), as `benchmarks/engine_overhead.py`
does. Ratio = engine throughput / bare throughput, per alternating pair.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

LOOP = re.compile(r"training loop (\d+\.\d+) s")
ENGINE = re.compile(r"training loop (\d+\.\d+) s, of which checkpoints (\d+\.\d+) s")


def hyperparameters(*, steps: int, batch: int, hidden: int, layers: int) -> dict[str, Any]:
    """The mlp hyperparameters both sides train with (the template's defaults otherwise)."""
    return {"steps": steps, "batch_size": batch, "hidden": hidden, "layers": layers}


def bare_seconds(hp: dict[str, Any], *, gpu: int | None = None, timeout: float = 600) -> float:
    """Seconds of the bare script's training loop under torchrun, one rank (on GPU `gpu`)."""
    from workers.contract.catalog import resolve_hyperparameters

    full = resolve_hyperparameters("mlp", hp)
    names = ("steps", "batch_size", "hidden", "layers", "features", "classes", "dataset_size")
    args = [str(full[n]) for n in names] + [str(full["seed"]), str(full["lr"]), "0.0"]
    root = Path(__file__).resolve().parents[1]  # the checkout, for `workers.rank...`
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root)}
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)  # the GPU the engine's job trained on
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1"]
        + ["-m", "benchmarks.bare_mlp", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=max(1.0, timeout),
    )
    match = LOOP.search(done.stdout)
    if done.returncode != 0 or match is None:
        raise RuntimeError(
            f"bare torchrun script failed: {done.stdout[-800:]}{done.stderr[-1500:]}"
        )
    return float(match.group(1))


def engine_seconds(client: httpx.Client, job_id: int) -> tuple[float, float]:
    """The engine's training loop without its checkpoints, and those, from rank 0's log."""
    lines = client.get(f"/api/jobs/{job_id}/logs", params={"limit": 10_000}).json()["lines"]
    for line in lines:
        found = ENGINE.search(line["line"]) if line["rank"] == 0 else None
        if found:
            loop, saving = float(found.group(1)), float(found.group(2))
            return loop - saving, saving
    raise RuntimeError(f"job {job_id}: rank 0 logged no 'training loop' line")


def summarize(pairs: list[tuple[float, float, float]], hp: dict[str, Any]) -> dict[str, Any]:
    """Throughputs and the per-pair ratio engine / bare, median (min – max)."""
    samples = hp["steps"] * hp["batch_size"]
    bare = [samples / b for b, _, _ in pairs]
    ours = [samples / e for _, e, _ in pairs]
    ratios = [b / e for b, e, _ in pairs]
    return {
        "model": f"mlp {hp['layers']} blocks, width {hp['hidden']}, batch {hp['batch_size']}, "
        f"{hp['steps']} steps, 1 device",
        "pairs": len(pairs),
        "bare torchrun samples/s": _spread(bare, ",.0f"),
        "Trainboard engine samples/s": _spread(ours, ",.0f"),
        "ratio engine / bare (throughput)": _spread(ratios, ".3f"),
        "engine checkpoints excluded, ms": _spread([s * 1000 for _, _, s in pairs], ".0f"),
        "ratio_median": round(statistics.median(ratios), 4),
    }


def _spread(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}} – {max(values):{fmt}})"
