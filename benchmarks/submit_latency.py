"""Submit → running latency on the local stack (`trainboard up`), excluding rank start-up.

A job is `running` once its worker has claimed the attempt, which happens before any
rank process (Python, torch) starts; the latency is the job's `started_at` minus its
`created_at`, both stamped by the server. Jobs are submitted one at a time onto an idle
cluster, so the figure is scheduling + dispatch + claim, not waiting for capacity.

    python -m benchmarks.submit_latency [--jobs 30]
    python -m benchmarks.submit_latency --jobs 40 --rounds 2 --tree after=. --tree before=/tmp/wt

With `--tree` (NAME=PATH, repeatable) each round starts the stack from each tree in turn
(alternating, so a ratio is read between neighbouring rounds of one run). Every run also
splits each job's latency at finer hops, from timestamps that a `sitecustomize` of this
benchmark's own (on the stack's PYTHONPATH) writes as the product's modules are imported:
submit → scheduler wake (its BLPOP returned) → pass start → pass commit → publish →
the worker's task received → task started → claim sent → claim handled (committed) →
claim answered. Nothing of it is in the product.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.tree_stack import stack_from
from tests.stack import RunningStack, wait_for

#: one step of the smallest template: the job is running as soon as its attempt is claimed
SPEC = {
    "name": "latency",
    "template": "mlp",
    "parallelism": {"strategy": "data", "devices": 1},
    "hyperparameters": {"steps": 1, "batch_size": 8},
}


#: the timestamps' recorder, loaded by every Python process of the stack (benchmark only)
SITECUSTOMIZE = r'''"""Benchmark-only timestamps (benchmarks.submit_latency): wraps a few product
functions as their modules are imported and appends `time pid event key` lines to
$TB_HOPS_FILE. Nothing of this is in the product."""

import importlib.abc
import importlib.util
import os
import sys
import time

OUT = os.environ.get("TB_HOPS_FILE", "")


def rec(event, key=""):
    with open(OUT, "a") as f:
        f.write(f"{time.time():.6f} {os.getpid()} {event} {key}\n")


def around(owner, name, before, after=None, key=lambda *a, **k: ""):
    inner = getattr(owner, name)

    def wrapped(*args, **kwargs):
        k = key(*args, **kwargs)
        rec(before, k)
        try:
            return inner(*args, **kwargs)
        finally:
            if after:
                rec(after, k)

    setattr(owner, name, wrapped)


def patch_loop(module):
    import redis

    inner = redis.Redis.blpop

    def blpop(self, keys, timeout=0):
        got = inner(self, keys, timeout=timeout)
        if got is not None and any("wake" in str(k) for k in keys):
            rec("wake")
        return got

    redis.Redis.blpop = blpop
    around(module.Scheduler, "tick", "pass_start", "pass_end")


def patch_nodes(module):
    around(module.NodePool, "stop", "committed")
    around(
        module.NodePool,
        "start",
        "publish_start",
        "publish_end",
        key=lambda self, orders: ",".join(str(o.attempt_id) for o in orders),
    )


def patch_attempts(module):
    around(
        module, "claim", "handler_start", "handler_end", key=lambda s, **kw: kw["attempt_id"]
    )


def patch_tasks(module):
    from celery import signals

    signals.task_received.connect(lambda **_: rec("received"), weak=False)
    signals.task_prerun.connect(lambda **_: rec("task_start"), weak=False)
    signals.worker_ready.connect(lambda **_: rec("consumer_ready"), weak=False)
    signals.celeryd_init.connect(lambda **_: rec("celeryd_init"), weak=False)
    signals.worker_init.connect(lambda **_: rec("worker_init"), weak=False)
    signals.import_modules.connect(lambda **_: rec("import_modules"), weak=False)


def patch_api(module):
    around(module.NodeApiClient, "register", "register_sent", "register_answered")
    around(
        module.NodeApiClient,
        "claim",
        "claim_sent",
        "claim_answered",
        key=lambda self, attempt_id, *a, **k: attempt_id,
    )


PATCHES = {
    "backend.scheduler.loop": patch_loop,
    "backend.executors.nodes": patch_nodes,
    "backend.jobs.attempts": patch_attempts,
    "workers.node.tasks": patch_tasks,
    "workers.node.api_client": patch_api,
}


class Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in PATCHES:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            PATCHES[name](module)

        spec.loader.exec_module = exec_module
        return spec


if OUT:
    sys.meta_path.insert(0, Hook())
'''

#: the finer hops, in order: (name, event it starts at, event it ends at)
HOPS = (
    ("submit -> wake", "created", "wake"),
    ("wake -> pass start", "wake", "pass_start"),
    ("pass start -> commit", "pass_start", "committed"),
    ("commit -> publish", "committed", "publish_start"),
    ("publish (sent) -> received", "publish_start", "received"),
    ("received -> task start", "received", "task_start"),
    ("task start -> claim sent", "task_start", "claim_sent"),
    ("claim sent -> handler", "claim_sent", "handler_start"),
    ("handler -> committed", "handler_start", "handler_end"),
    ("committed -> answered", "handler_end", "claim_answered"),
)


def _percentiles(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    return {
        "n": len(values),
        "p50_ms": 1000 * statistics.median(values),
        "p99_ms": 1000 * values[min(len(values) - 1, round(0.99 * (len(values) - 1)))],
        "max_ms": 1000 * values[-1],
    }


def submit_latencies(
    stack: RunningStack, jobs: int, spec: dict[str, Any] = SPEC
) -> dict[str, dict[str, float]]:
    """Submit `jobs` jobs one at a time, each after the last finished: submit -> running
    percentiles in ms (`started_at` - `created_at`, both the server's clock), and its two
    hops: submit -> placed (the scheduler made the attempt: its `created_at`) and placed ->
    claimed (the worker got the order from Celery and claimed it over HTTP)."""
    hops: dict[str, list[float]] = {"running": [], "placed": [], "claimed": []}
    stamps: list[dict[str, float]] = []
    with stack.client() as client:
        for _ in range(jobs):
            job_id = client.post("/api/jobs", json=spec).json()["id"]

            def finished(j: str = job_id) -> dict[str, Any] | None:
                view: dict[str, Any] = client.get(f"/api/jobs/{j}").json()
                return view if view["state"] in ("succeeded", "failed") else None

            job = wait_for(finished, timeout=120, what=f"job {job_id} to finish")
            attempt = client.get(f"/api/jobs/{job_id}/attempts").json()[0]
            created = datetime.fromisoformat(job["created_at"])
            placed = datetime.fromisoformat(attempt["created_at"])
            claimed = datetime.fromisoformat(attempt["claimed_at"])
            hops["running"].append(
                (datetime.fromisoformat(job["started_at"]) - created).total_seconds()
            )
            hops["placed"].append((placed - created).total_seconds())
            hops["claimed"].append((claimed - placed).total_seconds())
            stamps.append({"created": created.timestamp(), "attempt": attempt["id"]})
    found = {name: _percentiles(values) for name, values in hops.items() if values}
    events = os.environ.get("TB_HOPS_FILE")
    if events and Path(events).exists():
        found.update(fine_hops(Path(events), stamps))
    return found


def fine_hops(path: Path, jobs: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Each job's finer hops from the recorded events: each the first of its kind after the
    hop's start (jobs run one at a time, so nothing of another job falls in between)."""
    events = []
    for line in path.read_text().splitlines():
        at, _, event, *key = line.split()
        events.append((float(at), event, key[0] if key else ""))
    events.sort()
    found: dict[str, list[float]] = {name: [] for name, _, _ in HOPS}
    slowest: dict[str, float] = {}  # the hops of the job that took longest to its claim
    delivery: list[float] = []  # each job's publish -> received, in submission order
    for job in jobs:
        times = {"created": job["created"]}
        attempt = str(int(job["attempt"]))
        for _, start, end in HOPS:
            after = times.get(start)
            if after is None:
                break
            keyed = end in ("handler_start", "handler_end", "claim_sent", "claim_answered")
            match = next(
                (
                    at
                    for at, event, key in events
                    if event == end and at >= after and (not keyed or key == attempt)
                ),
                None,
            )
            if end == "publish_start":  # the publish that carried this attempt
                match = next(
                    (at for at, event, key in events if event == end and attempt in key.split(",")),
                    None,
                )
            if match is None:
                break
            times[end] = match
        mine = {
            name: 1000 * (times[end] - times[start])
            for name, start, end in HOPS
            if start in times and end in times
        }
        for name, took in mine.items():
            found[name].append(took / 1000)
        delivery.append(mine.get("publish (sent) -> received", float("nan")))
        if sum(mine.values()) > sum(slowest.values()):
            slowest = mine
    out: dict[str, dict[str, float]] = {
        name: _percentiles(values) for name, values in found.items() if values
    }
    ready = [at for at, event, _ in events if event == "consumer_ready"]
    if ready and jobs:  # the worker's consumer started after (+) or before (-) job 1's submit
        out["consumer ready - first submit (ms)"] = {"": 1000 * (ready[0] - jobs[0]["created"])}
    out["delivery per job (ms)"] = {str(n): ms for n, ms in enumerate(delivery, 1)}
    return {**out, "slowest job (ms)": slowest}


def stack_of(tree: Path, tmp: Path) -> contextlib.AbstractContextManager[RunningStack]:
    """`trainboard up` with the code of tree (its own Redis), recording its hops' events."""
    env = {"TB_HOPS_FILE": str(tmp / "hops.log")}
    return stack_from(tree, tmp, env=env, site=SITECUSTOMIZE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=1, help="rounds over every tree")
    parser.add_argument(
        "--tree", action="append", default=[], help="NAME=PATH of a tree to run (repeatable)"
    )
    args = parser.parse_args()
    trees = [tuple(t.split("=", 1)) for t in args.tree] or [("this", ".")]
    for number in range(args.rounds):
        order = trees if number % 2 == 0 else trees[::-1]  # after, before, before, after
        for name, tree in order:
            load = os.getloadavg()[0]
            with tempfile.TemporaryDirectory() as tmp, stack_of(Path(tree), Path(tmp)) as stack:
                found = submit_latencies(stack, args.jobs)
            running = found["running"]
            print(
                f"round {number + 1} {name}: load {load:.1f} -> {os.getloadavg()[0]:.1f}, "
                f"jobs {running['n']:.0f}"
            )
            for hop, what in (
                ("running", "submit -> running"),
                ("placed", "submit -> placed"),
                ("claimed", "placed -> claimed"),
                *((h, f"  {h}") for h, _, _ in HOPS),
            ):
                if hop in found:
                    p = found[hop]
                    print(f"  {what}: p50 {p['p50_ms']:.1f} ms, p99 {p['p99_ms']:.1f} ms")
            for extra in ("consumer ready - first submit (ms)", "delivery per job (ms)"):
                if extra in found:
                    print(f"  {extra}:", " ".join(f"{v:.0f}" for v in found[extra].values()))
            slowest = found.get("slowest job (ms)", {})
            print("  slowest job:", ", ".join(f"{h} {ms:.1f}" for h, ms in slowest.items()))


if __name__ == "__main__":
    main()
