"""Run table query: a page of 50 rows with their metric summaries, out of 10,000 jobs.

    python -m benchmarks.run_table [--jobs 10000] [--url URL]

On a temporary SQLite file, or on the empty database at --url (PostgreSQL). Each job has a
full spec (template mlp, hyperparameters lr/seed/batch_size, a tag on half of them) and
summaries of three metrics (loss, val_loss, grad_norm) in metric_summaries, as the
summaries loop leaves them. Timed: `GET /api/runs` through the app in-process (TestClient:
routing, the query, the page's job views, JSON), the first request of a fresh app and the
median of 5 more, for each shape of query the run table page asks.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import insert

from backend.app import create_app
from backend.auth.models import User
from backend.auth.service import bootstrap_admin_token, ensure_admin
from backend.db import Database
from backend.jobs.models import Job
from backend.migrate import upgrade
from backend.telemetry.models import MetricSummary
from benchmarks.own_redis import own_redis
from tests.app_settings import ADMIN_TOKEN, api_settings
from workers.contract.spec import JobSpec

HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
COLUMNS = "column=hyperparameters.lr&column=hyperparameters.seed&metric=loss&metric=val_loss"
QUERIES = {
    "newest first (default)": f"/api/runs?{COLUMNS}",
    "sorted by final loss": f"/api/runs?{COLUMNS}&sort=final:loss",
    "sorted by best val_loss, page 20": f"/api/runs?{COLUMNS}&sort=-best:val_loss&offset=1000",
    "sorted by lr (spec path)": f"/api/runs?{COLUMNS}&sort=spec:hyperparameters.lr",
    "filtered: tag + state + text": f"/api/runs?{COLUMNS}&tag=sweep&state=succeeded&q=run-1",
    "grouped by lr (mean ± std)": f"/api/runs?{COLUMNS}&group=hyperparameters.lr",
}
STATES = ("succeeded", "succeeded", "failed", "cancelled", "running")
LRS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)


def fill(db: Database, jobs: int) -> None:
    """`jobs` jobs with specs and three metric summaries each, in a few bulk inserts."""
    with db.session() as session:
        user = User(username="bench", role="user")
        session.add(user)
        session.flush()
        owner = user.id
    rows, summaries = [], []
    for i in range(1, jobs + 1):
        lr, seed = LRS[i % len(LRS)], i % 7
        spec = JobSpec.model_validate(
            {
                "name": f"run-{i}",
                "template": "mlp",
                "hyperparameters": {"lr": lr, "seed": seed, "batch_size": 32},
                "tags": ["sweep"] if i % 2 else [],
            }
        ).model_dump(mode="json")
        rows.append(
            {
                "id": i,
                "name": f"run-{i}",
                "owner_id": owner,
                "state": STATES[i % len(STATES)],
                "spec": spec,
                "priority_rank": 1,
                "devices_requested": 1,
                "total_steps": 200,
                "step": 200,
            }
        )
        loss = 1.0 / (1 + lr * 1000) + seed * 0.01
        for name, final, best, direction in (
            ("loss", loss, loss * 0.9, "min"),
            ("val_loss", loss * 1.1, loss, "min"),
            ("grad_norm", 2.0, None, None),
        ):
            summaries.append(
                {
                    "job_id": i,
                    "name": name,
                    "final": final,
                    "final_step": 200,
                    "best": best,
                    "best_step": None if best is None else 150,
                    "min": min(final, best or final),
                    "max": 5.0,
                    "direction": direction,
                    "watermark": i,
                }
            )
    with db.session() as session:
        session.execute(insert(Job), rows)
        session.execute(insert(MetricSummary), summaries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--url", help="an empty PostgreSQL database (default: temporary SQLite)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, own_redis() as redis_url:
        url = args.url or f"sqlite:///{Path(tmp) / 'bench.db'}"
        upgrade(url)
        db = Database(url)
        with db.session() as session:
            bootstrap_admin_token(session, configured=ADMIN_TOKEN)
            ensure_admin(session)
        started = time.perf_counter()
        fill(db, args.jobs)
        print(f"filled {args.jobs} jobs in {time.perf_counter() - started:.1f} s ({url})")
        db.dispose()
        settings = api_settings(Path(tmp), database_url=url, redis_url=redis_url)
        app = create_app(settings.model_copy(update={"run_ingest": False, "run_scheduler": False}))
        print("| query (page of 50 rows) | first request, ms | median of 5, ms | total rows |")
        print("|---|---|---|---|")
        with TestClient(app) as client:
            for label, path in QUERIES.items():
                times, total = [], 0
                for _ in range(6):
                    began = time.perf_counter()
                    answer = client.get(path, headers=HEADERS)
                    times.append((time.perf_counter() - began) * 1000)
                    assert answer.status_code == 200, answer.text
                    total = answer.json()["total"]
                first, median = times[0], statistics.median(times[1:])
                print(f"| {label} | {first:.0f} | {median:.0f} | {total} |")


if __name__ == "__main__":
    main()
