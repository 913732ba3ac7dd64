"""The acceptance sequence on a running `trainboard up` (see benchmarks/gpu_acceptance.py)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import httpx

from benchmarks import acceptance_overhead as overhead
from benchmarks.acceptance_checks import check_devices, check_metrics, check_node
from benchmarks.acceptance_jobs import (
    TERMINAL,
    Api,
    Planned,
    cancel,
    loss_falls,
    pause_resume,
    plan,
    record,
)
from benchmarks.acceptance_verdict import Verdict
from benchmarks.acceptance_watch import Watcher, metrics_families
from tests.job_users import reachable
from tests.stack import EMBEDDED_REDIS, RunningStack, trainboard_up

ROOT = Path(__file__).resolve().parents[1]
#: seconds kept at the end of --budget-s to stop the stack and write the verdict
WIND_DOWN_S = 45.0
TORCH_PROBE = """
import json, torch
info = {"torch": torch.__version__, "cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(), "gpus": torch.cuda.device_count()}
if info["cuda_available"]:
    info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    info["names"] = [torch.cuda.get_device_name(i) for i in range(info["gpus"])]
    a = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    info["bf16_matmul_ok"] = bool(torch.isfinite(a @ a).all())
    try:
        import pynvml
        pynvml.nvmlInit()
        info["driver"] = pynvml.nvmlSystemGetDriverVersion()
    except Exception as err:
        info["driver"] = f"unknown ({err})"
print(json.dumps(info))
"""


def run(args: argparse.Namespace) -> int:
    """The whole sequence; writes the verdict under args.out; 0 only if no check failed."""
    gpu = not args.dry_run
    verdict = Verdict(mode="gpu" if gpu else "dry-run")
    if args.install_record:
        verdict.install = json.loads(args.install_record.read_text())
        verdict.started -= float(verdict.install.get("began_monotonic_offset_s", 0))
    else:
        verdict.install = {"skipped": f"runs in this interpreter ({sys.executable})"}
    out = args.out.resolve()
    # a device slot's command limit ends in SIGTERM: stop the stack and still write the verdict
    signal.signal(signal.SIGTERM, _interrupted)
    # started in the background of a shell, SIGINT is ignored and `trainboard up` would
    # inherit that, never stopping on Ctrl-C: a handler here is reset to the default at exec
    signal.signal(signal.SIGINT, signal.default_int_handler)
    elapsed = time.time() - verdict.started
    args.deadline = time.monotonic() + args.budget_s - elapsed - WIND_DOWN_S
    try:
        devices = _preflight(verdict, gpu=gpu, cpu_slots=args.cpu_slots)
        if devices:
            _with_stack(verdict, args, out, gpu=gpu, devices=devices)
    except (Exception, KeyboardInterrupt) as err:  # the verdict is written all the same
        verdict.fail("the run itself", f"{type(err).__name__}: {err}")
        traceback.print_exc()
    if gpu:
        verdict.wall_s = time.time() - verdict.started
        verdict.check(
            f"total wall time incl. install under {args.budget_s:.0f} s",
            verdict.wall_s < args.budget_s,
            f"{verdict.wall_s:.0f} s (install {verdict.install.get('total_s', '?')} s)",
        )
    json_path, md_path = verdict.write(out)
    print(verdict.markdown())
    print(f"verdict: {json_path}, {md_path}")
    return 0 if verdict.passed else 1


def _interrupted(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signum}")


def _preflight(verdict: Verdict, *, gpu: bool, cpu_slots: int) -> int:
    """What this machine is, and the devices the run will use (0: nothing can run)."""
    probe = subprocess.run([sys.executable, "-c", TORCH_PROBE], capture_output=True, text=True)
    info: dict[str, Any] = json.loads(probe.stdout) if probe.returncode == 0 else {}
    verdict.machine = {
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        **{k: v for k, v in info.items() if k != "bf16_matmul_ok"},
    }
    if not info:
        verdict.fail("torch imports", probe.stderr[-500:])
        return 0
    if not gpu:
        verdict.skip("torch is a CUDA build and sees the GPUs", "no GPU (dry run)")
        return cpu_slots
    cuda_ok = bool(info["cuda"]) and info["cuda_available"] and info["gpus"] >= 1
    verdict.check(
        "torch is a CUDA build and sees the GPUs",
        cuda_ok,
        f"torch {info['torch']}, CUDA {info['cuda']}, {info['gpus']} GPU(s), "
        f"NCCL {info.get('nccl')}",
    )
    if cuda_ok:
        verdict.check("a bf16 matmul on cuda:0", bool(info.get("bf16_matmul_ok")))
    return int(info["gpus"]) if cuda_ok else 0


def _with_stack(
    verdict: Verdict, args: argparse.Namespace, out: Path, *, gpu: bool, devices: int
) -> None:
    steps = args.steps or (300 if gpu else 60)
    stack_dir = out / "stack"
    stack_dir.mkdir(parents=True, exist_ok=True)
    for path in (ROOT, Path(sys.executable).parent):  # ranks may run as the job user
        reachable(path)
    env = {"TRAINBOARD_SAMPLE_INTERVAL": str(args.sample_interval)}
    interrupted: KeyboardInterrupt | None = None
    started = False
    try:
        with trainboard_up(
            stack_dir, EMBEDDED_REDIS, cpu_slots=args.cpu_slots, extra_env=env
        ) as stack:
            started = True
            try:
                _sequence(verdict, args, stack, gpu=gpu, devices=devices, steps=steps)
            except KeyboardInterrupt as err:  # stop the stack as usual, then say so
                interrupted = err
    except AssertionError as err:  # its worker never registered, or processes were left
        log = stack_dir / "trainboard-up.log"
        tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
        name = "`trainboard up` stops cleanly" if started else "`trainboard up` starts"
        verdict.fail(name, f"{err}; its log ends: {tail}")
    else:
        verdict.check("`trainboard up` stops cleanly", True, "Ctrl-C; no process left behind")
    if interrupted is not None:
        verdict.fail(
            "the run itself", f"interrupted ({interrupted}): the checks after it did not run"
        )


def _sequence(
    verdict: Verdict,
    args: argparse.Namespace,
    stack: RunningStack,
    *,
    gpu: bool,
    devices: int,
    steps: int,
) -> None:
    api = Api(stack.url, stack.token, deadline=args.deadline if gpu else float("inf"))
    watcher = Watcher(stack.url, stack.token)
    watcher.start()
    check_node(verdict, watcher, gpu=gpu, devices=devices)
    polls: list[dict[str, list[tuple[dict[str, str], float]]]] = []

    def poll_metrics() -> None:
        if not polls or time.monotonic() - poll_metrics.last > 2:  # type: ignore[attr-defined]
            polls.append(metrics_families(stack.url, stack.token))
            poll_metrics.last = time.monotonic()  # type: ignore[attr-defined]

    poll_metrics.last = 0.0  # type: ignore[attr-defined]
    jobs, skipped = plan(devices=devices, gpu=gpu, steps=steps)
    for name, why in skipped:
        verdict.skip(f"job {name}", why)
    phases = {
        "training jobs": lambda: _training_jobs(
            verdict, api, jobs, gpu=gpu, steps=steps, tick=poll_metrics
        ),
        "pause and resume": lambda: pause_resume(verdict, api, gpu=gpu, tick=poll_metrics),
        "cancel": lambda: cancel(verdict, api, tick=poll_metrics),
        "engine overhead": lambda: _overhead(verdict, api, args, gpu=gpu),
    }
    for name, phase in phases.items():
        try:  # one phase breaking (a timeout, a refused request) does not stop the others
            phase()
        except (TimeoutError, RuntimeError, httpx.HTTPError) as err:
            verdict.fail(name, f"{type(err).__name__}: {err}")
    polls.append(metrics_families(stack.url, stack.token))
    time.sleep(1.5 * args.sample_interval)  # the last samples' deltas
    watcher.stop()
    check_devices(verdict, watcher, gpu=gpu, interval=args.sample_interval)
    check_metrics(verdict, polls, watcher, gpu=gpu)
    for job in verdict.jobs:
        seen = watcher.job_states.get(job["id"], [])
        verdict.check(
            f"job {job['name']}: the board's websocket saw it end {job['state']}",
            bool(seen) and seen[-1] == job["state"],
            " → ".join(seen),
        )
    verdict.check("websocket: no error or resync", not watcher.errors, "; ".join(watcher.errors))


def _training_jobs(
    verdict: Verdict, api: Api, jobs: list[Planned], *, gpu: bool, steps: int, tick: Any
) -> None:
    """Submit every training job at once; the scheduler places them as devices free up."""
    began = time.monotonic()
    for job in jobs:
        job.job_id = api.submit(job.spec)
    for job in jobs:
        try:
            final = api.wait(job.job_id, lambda j: j["state"] in TERMINAL, timeout=600,
                             what="finished", tick=tick)  # fmt: skip
        except TimeoutError as err:
            verdict.fail(f"job {job.name}", str(err))
            continue
        row = record(api, final, began)
        verdict.jobs.append(row)
        ok = final["state"] == job.expect and job.reason_has in (final["reason"] or "")
        detail = f"{final['state']} at step {final['step']}" + (
            f": {final['reason']}" if final["reason"] else ""
        )
        if not ok:  # what its ranks said last, for whoever reads the verdict
            detail += " | last log lines: " + " / ".join(
                line["line"] for line in api.logs(job.job_id)[-5:]
            )
        verdict.check(f"job {job.name} ends {job.expect}", ok, detail)
        if job.expect == "succeeded" and ok:
            falls, detail, row["loss"] = loss_falls(api, job.job_id, steps)
            verdict.check(f"job {job.name}: loss falls", falls, detail)
        if ok and "NCCL_DEBUG" in job.spec.get("env", {}):
            said = [line["line"] for line in api.logs(job.job_id) if "NCCL version" in line["line"]]
            verdict.check(f"job {job.name}: its ranks ran NCCL", bool(said), "; ".join(said[:2]))
    if not any("env" in j.spec for j in jobs):
        why = "needs 2 GPUs" if gpu else "no GPU (CPU ranks use gloo)"
        verdict.skip("multi-rank jobs run on NCCL", why)
    if not any(j.expect == "succeeded" and j.spec.get("precision") == "fp16" for j in jobs):
        verdict.skip("fp16 with GradScaler trains", "no GPU (fp16 needs CUDA's GradScaler)")


def _overhead(verdict: Verdict, api: Api, args: argparse.Namespace, *, gpu: bool) -> None:
    """A Trainboard job, then a bare torchrun script on the same device; alternating pairs."""
    size = {"steps": 2000, "batch": 256, "hidden": 1024, "layers": 4} if gpu else {
        "steps": 200, "batch": 64, "hidden": 256, "layers": 4}  # fmt: skip
    hp = overhead.hyperparameters(**size)
    pairs = []
    for i in range(args.pairs or (3 if gpu else 1)):
        spec = {"name": f"overhead-{i + 1}", "template": "mlp", "hyperparameters": hp}
        job_id = api.submit(spec)
        final = api.wait(job_id, lambda j: j["state"] in TERMINAL, timeout=300, what="ended")
        if final["state"] != "succeeded":
            verdict.fail("engine overhead", f"job {job_id} {final['state']}: {final['reason']}")
            return
        engine = overhead.engine_seconds(api.client, job_id)
        device = final["devices"][0] if gpu else None
        left = min(600.0, api.deadline - time.monotonic())
        pairs.append((overhead.bare_seconds(hp, gpu=device, timeout=left), *engine))
    verdict.overhead = overhead.summarize(pairs, hp)
    ratio = verdict.overhead["ratio_median"]
    verdict.check("engine overhead measured (bare torchrun and engine on one device)", True,
                  f"ratio engine / bare {ratio:.3f}")  # fmt: skip
    if gpu:
        verdict.check(
            f"engine throughput ≥ {1 - args.max_overhead:.2f} x bare on the GPU (target: 0.99)",
            ratio >= 1 - args.max_overhead,
            f"{ratio:.3f} ({'meets' if ratio >= 0.99 else 'misses'} the 1% target)",
        )
    else:
        verdict.skip("engine throughput within bounds on the GPU", "no GPU (CPU timing not judged)")
