"""GET /api/series/costs: each job's update mode costs per rank, aggregated on the server."""

from __future__ import annotations

from fastapi.testclient import TestClient

from backend.db import Database
from tests.telemetry.helpers import ADMIN, add_attempt, user_token
from tests.telemetry.test_compare import add_curve


def add_rank_metric(db: Database, attempt: int, name: str, rank: int, values: list[float]) -> None:
    """Steps 1.. of one rank's metric, one second apart."""
    add_curve(db, attempt, name, values, t0=1e3, rank=rank, first_step=1)


def test_each_ranks_step_time_and_bytes_are_the_means_of_its_newest_steps(
    api: tuple[TestClient, Database],
) -> None:
    client, db = api
    job, attempt = add_attempt(db)
    # 60 steps: the first 10 (warm-up, 1 s each) fall outside the 50-step window
    add_rank_metric(db, attempt, "step_time", 0, [1.0] * 10 + [0.1] * 50)
    add_rank_metric(db, attempt, "step_time", 1, [1.0] * 10 + [0.3] * 50)  # the straggler
    add_rank_metric(db, attempt, "bytes_sent", 0, [3000.0] * 60)
    add_rank_metric(db, attempt, "bytes_sent", 1, [1000.0] * 60)
    add_rank_metric(db, attempt, "bytes_received", 0, [1000.0] * 60)
    add_rank_metric(db, attempt, "bytes_received", 1, [3000.0] * 60)

    body = client.get(f"/api/series/costs?job={job}", headers=ADMIN).json()

    assert [b["job_id"] for b in body] == [job]
    [costs] = body
    assert costs["window"] == 50
    assert costs["server"] is None  # no server metrics recorded: a sync job
    by_rank = {r["rank"]: r for r in costs["ranks"]}
    assert abs(by_rank[0]["step_time"] - 0.1) < 1e-9
    assert abs(by_rank[1]["step_time"] - 0.3) < 1e-9
    assert (by_rank[0]["bytes_sent"], by_rank[0]["bytes_received"]) == (3000.0, 1000.0)
    assert (by_rank[1]["bytes_sent"], by_rank[1]["bytes_received"]) == (1000.0, 3000.0)


def test_the_servers_queue_and_staleness_are_rank_0s_over_the_whole_run(
    api: tuple[TestClient, Database],
) -> None:
    client, db = api
    job, attempt = add_attempt(db)
    add_rank_metric(db, attempt, "step_time", 0, [0.1] * 4)
    add_rank_metric(db, attempt, "server_queue", 0, [0.0, 2.0, 1.0, 1.0])
    add_rank_metric(db, attempt, "updates_applied", 0, [1.0, 3.0, 0.0, 0.0])
    # a step that applied 3 updates at mean staleness 2 weighs three times one at 1
    add_rank_metric(db, attempt, "staleness_mean", 0, [1.0, 2.0, 0.0, 0.0])
    add_rank_metric(db, attempt, "staleness_max", 0, [1.0, 3.0, 0.0, 0.0])

    [costs] = client.get(f"/api/series/costs?job={job}", headers=ADMIN).json()

    assert costs["server"] == {
        "queue_mean": 1.0,
        "queue_max": 2.0,
        "staleness_mean": (1 * 1.0 + 3 * 2.0) / 4,
        "staleness_max": 3.0,
        "updates_applied": 4.0,
    }


def test_someone_elses_job_is_not_found(api: tuple[TestClient, Database]) -> None:
    client, db = api
    job, _ = add_attempt(db, owner="alice")
    bob = {"Authorization": f"Bearer {user_token(db, 'bob')}"}
    assert client.get(f"/api/series/costs?job={job}", headers=bob).status_code == 404
    assert client.get(f"/api/series/costs?job={job}", headers=ADMIN).status_code == 200
