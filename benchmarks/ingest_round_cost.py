"""The CPU one small ingest round costs: writing and committing N metric points on SQLite.

    python -m benchmarks.ingest_round_cost [--points 30] [--rounds 300]

Live delivery commits a round for every few XADDs (docs/benchmarks.md, "Live delivery":
the per-hop times), so a round's fixed cost, not its per-point cost, bounds how often
the ingest can commit and how long a point waits for the round before it. This runs
what `Ingest.write` runs (one transaction: `write_batch`'s attempts lookup, insert and
job step, then the commit) on a fresh SQLite database in this process, after 50 rounds
of warm-up, and prints the process CPU and wall time per round.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import defaultdict
from typing import Any

from backend.db import Database
from backend.migrate import upgrade
from backend.telemetry.ingest.points import Points
from backend.telemetry.ingest.writer import write_batch
from tests.telemetry.helpers import add_attempt
from workers.contract.protocol import METRICS_STREAM


def round_cost(points: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/rounds.db"
        upgrade(url)
        db = Database(url)
        _, attempt_id = add_attempt(db)
        step = 0

        def one() -> None:
            nonlocal step
            rows = [
                {
                    "attempt_id": attempt_id,
                    "rank": i % 8,
                    "step": step + i // 8,
                    "name": "loss",
                    "value": 1.0,
                    "time": time.time(),
                }
                for i in range(points)
            ]
            step += points // 8 + 1
            with db.session() as session:  # as Ingest.write: committed on leaving
                items: dict[str, Any] = defaultdict(list)  # as a Round holds them
                items[METRICS_STREAM] = Points.of(rows)
                write_batch(session, items)

        for _ in range(50):
            one()
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(rounds):
            one()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        db.dispose()
    return {
        "points": points,
        "rounds": rounds,
        "cpu_ms_per_round": cpu / rounds * 1000,
        "wall_ms_per_round": wall / rounds * 1000,
        "load": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    print(json.dumps(round_cost(args.points, args.rounds)))


if __name__ == "__main__":
    main()
