"""Series and CSV routes over real rows: downsampling, attempt merging, access (compare too)."""

from __future__ import annotations

import csv
import io
import math

import pytest
from fastapi.testclient import TestClient

from backend.db import Database
from backend.jobs.models import Attempt
from backend.telemetry.models import MetricPoint
from tests.telemetry.helpers import ADMIN, add_attempt, insert_points, user_token


def add_points(
    db: Database, attempt: int, steps: range, ranks: int = 1, name: str = "loss"
) -> None:
    """Rows whose value is sin(step / 50) + rank, at time 1000 + step."""
    rows = [
        {
            "attempt_id": attempt,
            "rank": r,
            "step": s,
            "name": name,
            "value": math.sin(s / 50) + r,
            "time": 1000.0 + s,
        }  # fmt: skip
        for s in steps
        for r in range(ranks)
    ]
    insert_points(db, rows)


def test_a_long_series_is_downsampled_to_its_budget_keeping_the_ends(
    api: tuple[TestClient, Database],
) -> None:
    client, db = api
    job, attempt = add_attempt(db)
    add_points(db, attempt, range(10_000), ranks=2)
    body = client.get(f"/api/series/jobs/{job}/loss?points=500", headers=ADMIN).json()
    assert "step" in body, body
    assert len(body["step"]) == 500
    assert (body["step"][0], body["step"][-1]) == (0, 9999)
    assert body["value"][0] == pytest.approx(0.5)  # the mean of ranks 0 and 1 at step 0
    raw = client.get(f"/api/series/jobs/{job}/loss?points=0&rank=1", headers=ADMIN).json()
    assert len(raw["step"]) == 10_000 and raw["value"][0] == 1.0

    add_points(db, attempt, range(10_000, 10_100), ranks=2)  # the cache picks up new rows
    again = client.get(f"/api/series/jobs/{job}/loss?points=0", headers=ADMIN).json()
    assert again["step"][-1] == 10_099 and len(again["step"]) == 10_100


def test_a_resumed_attempt_replaces_the_steps_it_repeats(api: tuple[TestClient, Database]) -> None:
    client, db = api
    job, first = add_attempt(db)
    add_points(db, first, range(0, 100))
    with db.session() as session:
        second = Attempt(job_id=job, number=2, node_name="n", devices=[0], master_port=1)
        session.add(second)
        session.flush()
        session.add_all(
            MetricPoint(attempt_id=second.id, rank=0, step=s, name="loss", value=-1.0, time=0.0)
            for s in range(80, 120)
        )
    body = client.get(f"/api/series/jobs/{job}/loss?points=0", headers=ADMIN).json()
    assert body["step"] == list(range(120))
    assert set(body["value"][80:]) == {-1.0} and -1.0 not in body["value"][:80]
    per_attempt = client.get(
        f"/api/series/attempts/loss?attempt={first}&attempt={second.id}&points=10", headers=ADMIN
    ).json()
    assert [(a["number"], len(a["step"])) for a in per_attempt] == [(1, 10), (2, 10)]


def test_csv_export_holds_every_raw_point(api: tuple[TestClient, Database]) -> None:
    client, db = api
    job, attempt = add_attempt(db)
    add_points(db, attempt, range(25_000), ranks=2)
    add_points(db, attempt, range(10), name="accuracy")
    response = client.get(f"/api/series/jobs/{job}.csv?name=loss", headers=ADMIN)
    assert response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert len(rows) == 50_000 and {r["name"] for r in rows} == {"loss"}
    second = {"job_id": str(job), "attempt": "1", "rank": "0", "step": "1", "name": "loss"}
    assert rows[1] == {**second, "value": str(math.sin(1 / 50)), "time": "1001.0"}


def test_another_users_job_is_not_found(api: tuple[TestClient, Database]) -> None:
    client, db = api
    job, _ = add_attempt(db, owner="alice")
    secret = user_token(db, "bob")
    bob_headers = {"Authorization": f"Bearer {secret}"}
    for path in (f"/api/series/jobs/{job}/loss", f"/api/series/jobs/{job}.csv",
                 f"/api/series/compare?job={job}&metric=loss",
                 f"/api/series/compare.csv?job={job}&metric=loss"):  # fmt: skip
        assert client.get(path, headers=bob_headers).status_code == 404
        assert client.get(path).status_code == 401
