"""Submit → running latency on the local stack (`trainboard up`), excluding rank start-up.

A job is `running` once its worker has claimed the attempt, which happens before any
rank process (Python, torch) starts; the latency is the job's `started_at` minus its
`created_at`, both stamped by the server. Jobs are submitted one at a time onto an idle
cluster, so the figure is scheduling + dispatch + claim, not waiting for capacity.

    python -m benchmarks.submit_latency [--jobs 30]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.stack import RunningStack, trainboard_up, wait_for

#: one step of the smallest template: the job is running as soon as its attempt is claimed
SPEC = {
    "name": "latency",
    "template": "mlp",
    "parallelism": {"strategy": "data", "devices": 1},
    "hyperparameters": {"steps": 1, "batch_size": 8},
}


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
    return {name: _percentiles(values) for name, values in hops.items() if values}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, trainboard_up(Path(tmp), cpu_slots=2) as stack:
        found = submit_latencies(stack, args.jobs)
    running = found["running"]
    print(f"jobs: {running['n']:.0f}")
    print(f"submit -> running: p50 {running['p50_ms']:.0f} ms, p99 {running['p99_ms']:.0f} ms")
    for name, what in (("placed", "submit -> placed"), ("claimed", "placed -> claimed")):
        hop = found[name]
        print(f"  {what}: p50 {hop['p50_ms']:.1f} ms, p99 {hop['p99_ms']:.1f} ms")


if __name__ == "__main__":
    main()
