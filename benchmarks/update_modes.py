"""Update modes side by side (#35): the same model and data in each mode, one rank slowed.

    .venv/bin/python -m benchmarks.update_modes --devices 2 4 --steps 150 --slow-ms 20

Each mode runs as real ranks under torchrun (gloo on CPU, NCCL on GPUs: the engine's own
Trainer, only the metrics go to files instead of a supervisor), the last rank slowed by the
spec's `straggler` (it sleeps in each step, as a slower device would take longer; with a
dedicated server that rank is a worker). Per mode and rank count:
rank 0's training-loop seconds per job step, the bytes each rank handed to the network per
job step (measured by the engine: `bytes_sent` + `bytes_received`), the gradients applied
per second (async ranks take different numbers of steps), the seconds until rank 0's
training loss (mean of its last SMOOTH steps) first reaches the target loss, and the loss of
the final weights over the whole dataset; then each as a ratio to sync/allreduce (DDP) of
the same run. The target: `--target-loss`, or by default TARGET_OVER_DDP times the loss DDP
(run first) ended at, the same target for every mode of a rank count.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: name shown → parallelism fields (beside strategy data and devices)
MODES: dict[str, dict[str, object]] = {
    "sync/allreduce": {},
    "sync/parameter_server": {"reduce": "parameter_server"},
    "sync/parameter_server, dedicated": {"reduce": "parameter_server", "server": "dedicated"},
    "async": {"update": "async"},
    "async, dedicated": {"update": "async", "server": "dedicated"},
    "async, max_staleness N-1": {"update": "async", "max_staleness": 0},  # 0: devices - 1
    "local_sgd, sync_every 8": {"update": "local_sgd", "sync_every": 8},
}
BASELINE = "sync/allreduce"
#: steps rank 0's training loss is averaged over before it is compared with the target
SMOOTH = 10
#: the default target: this times the smoothed loss the first DDP run of a rank count ended at
TARGET_OVER_DDP = 1.1
#: samples per job step in every mode: splits evenly over 1, 2, 3 or 4 training ranks
GLOBAL_BATCH = 96


def spec_for(
    mode: dict[str, object], *, devices: int, steps: int, slow_ms: float
) -> dict[str, Any]:
    """The job: the mlp template, GLOBAL_BATCH whatever the training ranks; the last rank
    slowed by `slow_ms` a step (none at 0)."""
    parallelism = {"strategy": "data", "devices": devices, **mode}
    if parallelism.get("max_staleness") == 0:
        parallelism["max_staleness"] = max(devices - 1, 1)
    training = devices - (1 if parallelism.get("server") == "dedicated" else 0)
    straggler = {"rank": devices - 1, "delay_ms": slow_ms} if slow_ms > 0 else None
    return {
        "name": "update-modes-benchmark",
        "template": "mlp",
        "parallelism": parallelism,
        "hyperparameters": {
            "steps": steps,
            "batch_size": GLOBAL_BATCH // training,
            "dataset_size": 4096,
            "hidden": 256,
            "layers": 4,
            "lr": 0.003,
            "seed": 0,
        },
        "lr_schedule": {"kind": "cosine", "warmup_steps": 10},
        "checkpoint": {"every_steps": None},
        "straggler": straggler,
    }


def run_mode(spec: dict[str, Any], *, out: Path, timeout_s: float) -> dict[str, Any]:
    """Train the spec under torchrun; what rank 0 and the others measured."""
    from tests.workers.reference import run_ranks

    out.mkdir(parents=True)
    (out / "spec.json").write_text(json.dumps(spec))
    nproc = spec["parallelism"]["devices"]
    done = run_ranks(nproc, __file__, "--rank-program", str(out), timeout=timeout_s)
    if done.returncode:
        raise RuntimeError(f"{spec['parallelism']} failed:\n{done.stderr[-3000:]}")
    return summarize(spec, out)


def summarize(spec: dict[str, Any], out: Path) -> dict[str, Any]:
    import torch

    from workers.contract.spec import JobSpec
    from workers.rank.engine.templates import build_task

    job = JobSpec.model_validate(spec)
    devices, steps = job.parallelism.devices, int(job.hyperparameters["steps"])
    loop = json.loads((out / "loop.json").read_text())
    rows = {
        r: [json.loads(line) for line in (out / f"rank{r}.jsonl").read_text().splitlines()]
        for r in range(devices)
    }

    def moved(rank: int) -> float:
        return sum(
            row.get("bytes_sent", 0.0) + row.get("bytes_received", 0.0) for row in rows[rank]
        )

    # gradients applied: one per training rank a step under sync and local SGD; under async
    # rank 0's own steps (none for a dedicated server) and the workers' it applied
    par = job.parallelism
    applied = steps * (1 - par.servers if par.mode == "async" else par.data_parallel_degree)
    applied += sum(row.get("updates_applied", 0.0) for row in rows[0])
    task = build_task("mlp", job.hyperparameters)
    task.model.load_state_dict(torch.load(out / "final.pt", weights_only=True))
    with torch.no_grad():
        loss = float(task.loss_fn(task.model(task.inputs), task.targets))
    seconds = loop["seconds"]
    return {
        # (seconds, smoothed loss) at each of rank 0's steps: time to a target is read off it
        "curve": loss_curve(rows[0], seconds),
        "devices": devices,
        "seconds_per_step": seconds / steps,
        "rank0_bytes_per_step": moved(0) / steps,
        "worker_bytes_per_step": sum(moved(r) for r in range(1, devices))
        / max(devices - 1, 1)
        / steps,
        "gradients_per_s": applied / seconds,
        "final_loss": loss,
        "staleness_max": max((row.get("staleness_max", 0.0) for row in rows[0]), default=0.0),
    }


def loss_curve(rows: list[dict[str, Any]], seconds: float) -> list[tuple[float, float]]:
    """Rank 0's loop seconds at the end of each step and its loss averaged over SMOOTH steps.

    Rows are published in groups, so their arrival says little; a step's end is the running
    sum of rank 0's own step times, scaled so the last one ends at the loop's measured seconds
    (which also hold what happens between steps: reports and, under async, serving).
    """
    rows = [r for r in rows if "loss" in r and "step_time" in r]
    times = list(itertools.accumulate(float(r["step_time"]) for r in rows))
    scale = seconds / times[-1] if times and times[-1] > 0 else 1.0
    losses = [float(r["loss"]) for r in rows]
    return [
        (t * scale, sum(losses[max(0, i + 1 - SMOOTH) : i + 1]) / min(i + 1, SMOOTH))
        for i, t in enumerate(times)
    ]


def time_to(curve: list[tuple[float, float]], target: float) -> float | None:
    """Seconds until the smoothed loss first reaches target (None: it never did)."""
    return next((t for t, loss in curve if loss <= target), None)


def add_time_to_target(modes: dict[str, dict[str, Any]], target: float | None) -> float:
    """Each run's seconds to the target (default: TARGET_OVER_DDP × DDP's end); the target."""
    if target is None:
        target = TARGET_OVER_DDP * modes[BASELINE]["curve"][-1][1]
    for result in modes.values():
        result["target_loss"] = target
        result["time_to_target"] = time_to(result.pop("curve"), target)
    return target


def table(results: dict[int, dict[str, dict[str, Any]]]) -> str:
    """Markdown: absolute numbers and ratios to sync/allreduce of the same rank count."""
    lines = [
        "| ranks | mode | s/step | ×DDP | rank 0 bytes/step | ×DDP | other ranks bytes/step "
        "| gradients/s | ×DDP | time to target loss | ×DDP | final loss | ×DDP | max staleness |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for devices, modes in results.items():
        base = modes[BASELINE]
        for name, r in modes.items():

            def ratio(key: str, r: dict[str, Any] = r, base: dict[str, Any] = base) -> str:
                return f"{r[key] / base[key]:.2f}" if base[key] and r[key] is not None else "—"

            reached = r["time_to_target"]

            lines.append(
                f"| {devices} | {name} | {r['seconds_per_step'] * 1000:.1f} ms "
                f"| {ratio('seconds_per_step')} | {r['rank0_bytes_per_step'] / 1e6:.2f} MB "
                f"| {ratio('rank0_bytes_per_step')} | {r['worker_bytes_per_step'] / 1e6:.2f} MB "
                f"| {r['gradients_per_s']:.0f} | {ratio('gradients_per_s')} "
                f"| {'not reached' if reached is None else f'{reached:.2f} s'} "
                f"| {ratio('time_to_target')} "
                f"| {r['final_loss']:.4f} | {ratio('final_loss')} | {r['staleness_max']:.0f} |"
            )
    return "\n".join(lines)


def machine() -> str:
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU (gloo)"
    return (
        f"{platform.node()}: {os.cpu_count()} CPUs, {device}, torch {torch.__version__}, "
        f"Python {platform.python_version()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument(
        "--slow-ms", type=float, default=20.0, help="the last rank's extra ms a step (0: none)"
    )
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument("--json", type=Path, help="write every number here too")
    parser.add_argument(
        "--target-loss",
        type=float,
        help=f"default: {TARGET_OVER_DDP} x DDP's final loss (rank 0's, mean of {SMOOTH} steps)",
    )
    args = parser.parse_args()
    modes = [BASELINE, *(m for m in args.modes if m != BASELINE)]
    load_before = os.getloadavg()
    results: dict[int, dict[str, dict[str, Any]]] = {}
    targets: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="tb-update-modes-") as scratch:
        for devices in args.devices:
            results[devices] = {}
            # the baseline again at the end: how far the machine's load moved the numbers
            for i, name in enumerate([*modes, BASELINE]):
                spec = spec_for(
                    MODES[name], devices=devices, steps=args.steps, slow_ms=args.slow_ms
                )
                out = Path(scratch) / f"{devices}-{i}"
                shown = f"{name} (again, last)" if i == len(modes) else name
                results[devices][shown] = run_mode(spec, out=out, timeout_s=args.timeout)
                shown_numbers = {k: v for k, v in results[devices][shown].items() if k != "curve"}
                print(f"{devices} ranks, {shown}: {shown_numbers}", file=sys.stderr)
            targets[devices] = add_time_to_target(results[devices], args.target_loss)
    load_after = os.getloadavg()
    print(f"machine: {machine()}")
    print(
        f"load average (1/5/15 min) before {'/'.join(f'{x:.1f}' for x in load_before)}, "
        f"after {'/'.join(f'{x:.1f}' for x in load_after)}"
    )
    print(f"{args.steps} job steps, the last rank slowed {args.slow_ms:g} ms a step")
    print(
        "target loss (rank 0's training loss, mean of its last "
        f"{SMOOTH} steps): " + ", ".join(f"{t:.4f} at {d} ranks" for d, t in targets.items())
    )
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


# -- the rank program (under torchrun) -------------------------------------------------------


def rank_program(out: Path) -> None:
    """One rank: the engine's Trainer on the spec, metric rows to rank<N>.jsonl."""
    import torch
    import torch.distributed as dist

    from workers.contract.spec import JobSpec
    from workers.rank.engine.distributed import ParallelContext
    from workers.rank.engine.metrics import MetricBuffer, Row
    from workers.rank.engine.templates import build_task
    from workers.rank.engine.train import Trainer

    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():  # as the engine does (workers/rank/engine/distributed.py)
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
        control = dist.new_group(backend="gloo")
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
        control = dist.group.WORLD
    spec = JobSpec.model_validate_json((out / "spec.json").read_text())
    ctx = ParallelContext(
        rank, dist.get_world_size(), device, control, servers=spec.parallelism.servers
    )
    trainer = Trainer(spec, build_task("mlp", spec.hyperparameters), ctx)
    written = out / f"rank{rank}.jsonl"

    def record(rows: list[Row]) -> None:
        with written.open("a") as file:
            for step, values in rows:
                file.write(json.dumps({"step": step, **values}) + "\n")

    trainer.metrics = MetricBuffer(record)
    began = time.perf_counter()
    trainer.run()
    seconds = time.perf_counter() - began
    if rank == 0:
        state = {k: v.detach().cpu() for k, v in trainer.model.state_dict().items()}
        torch.save(state, out / "final.pt")
        (out / "loop.json").write_text(json.dumps({"seconds": seconds}))
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # as the engine leaves (workers/rank/engine/__main__.py `_exit`)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--rank-program":
        sys.path.insert(0, str(ROOT))
        rank_program(Path(sys.argv[2]))
    else:
        main()
