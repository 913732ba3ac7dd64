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

from tests.stack import trainboard_up, wait_for


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=30)
    args = parser.parse_args()
    spec = {
        "name": "latency",
        "template": "mlp",
        "parallelism": {"strategy": "data", "devices": 1},
        "hyperparameters": {"steps": 1, "batch_size": 8},
    }
    latencies = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        trainboard_up(Path(tmp), cpu_slots=2) as stack,
        stack.client() as client,
    ):
        for _ in range(args.jobs):
            job_id = client.post("/api/jobs", json=spec).json()["id"]
            job = wait_for(
                lambda j=job_id: (
                    (v := client.get(f"/api/jobs/{j}").json())["state"] in ("succeeded", "failed")
                    and v
                ),
                timeout=120,
                what=f"job {job_id} to finish",
            )
            started = datetime.fromisoformat(job["started_at"])
            created = datetime.fromisoformat(job["created_at"])
            latencies.append((started - created).total_seconds())
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
    print(f"jobs: {len(latencies)}")
    p50 = statistics.median(latencies)
    print(f"submit -> running: p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms")


if __name__ == "__main__":
    main()
