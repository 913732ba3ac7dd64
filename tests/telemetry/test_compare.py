"""The compare route owns the Compare page's rules: spec diff, summaries, alignment, CSV."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backend.db import Database
from backend.jobs.models import Job, JobEvent
from backend.telemetry.series.curves import lower_is_better
from tests.telemetry.helpers import ADMIN, add_attempt, insert_points
from tests.telemetry.test_series import add_points


def add_curve(
    db: Database,
    attempt: int,
    name: str,
    values: list[float],
    t0: float,
    *,
    rank: int = 0,
    first_step: int = 0,
) -> None:
    """One rank's metric: steps first_step.. with the given values, step s at time t0 + s."""
    rows = [
        {"attempt_id": attempt, "rank": rank, "step": s, "name": name, "value": v, "time": t0 + s}
        for s, v in enumerate(values, start=first_step)
    ]
    insert_points(db, rows)


def two_jobs(db: Database) -> tuple[tuple[int, int], tuple[int, int]]:
    """Two running jobs of alice's: (job id, attempt id) of each."""
    return add_attempt(db), add_attempt(db)


def _two_losses_compared(
    api: tuple[TestClient, Database], *, b_from: float, x: str
) -> tuple[int, int, dict[str, Any]]:
    """Job a's loss 3, 2, 1 from time 1_700_000_000, job b's 5, 4 from `b_from`, one second
    apart: (a, b, their compared loss curve with x the given alignment)."""
    client, db = api
    (a, attempt_a), (b, attempt_b) = two_jobs(db)
    add_curve(db, attempt_a, "loss", [3.0, 2.0, 1.0], t0=1_700_000_000.0)
    add_curve(db, attempt_b, "loss", [5.0, 4.0], t0=b_from)
    body = client.get(f"/api/series/compare?job={a}&job={b}&x={x}", headers=ADMIN).json()
    return a, b, body["curves"]["loss"]


def test_compare_gives_jobs_spec_differences_summaries_and_aligned_curves(
    api: tuple[TestClient, Database],
) -> None:
    client, db = api
    a, attempt_a = add_attempt(db)
    b, attempt_b = add_attempt(db, owner="bob")
    with db.session() as session:
        job_b = session.get_one(Job, b)
        job_b.spec = {**job_b.spec, "name": "other-name", "hyperparameters": {"lr": 0.5}}
    add_points(db, attempt_a, range(0, 300))
    add_points(db, attempt_b, range(0, 200, 2))
    add_points(db, attempt_b, range(5), name="accuracy")
    body = client.get(f"/api/series/compare?job={a}&job={b}&points=50", headers=ADMIN).json()
    assert [(j["id"], j["owner"], j["state"]) for j in body["jobs"]] == [
        (a, "alice", "running"),
        (b, "bob", "running"),
    ]
    # without metric=, every metric any of the jobs reported; names are never a difference
    assert body["metrics"] == ["accuracy", "loss"]
    assert body["spec_diff"] == {"hyperparameters.lr": [0.1, 0.5]}
    assert body["spec_same"] == {"template": "mlp"}
    loss_a = body["summary"]["loss"][str(a)]
    assert loss_a["final_step"] == 299 and loss_a["best"] == loss_a["min"] == pytest.approx(
        -1, abs=1e-3
    )
    assert loss_a["max"] == pytest.approx(1, abs=1e-3)
    assert body["summary"]["accuracy"][str(a)]["final"] is None
    assert body["summary"]["accuracy"][str(b)]["best_step"] == 4  # highest is best
    curves = body["curves"]["loss"]
    assert curves["x"] == sorted(curves["x"])
    assert {len(column) for column in curves["values"].values()} == {len(curves["x"])}
    assert sum(v is not None for v in curves["values"][str(b)]) == 50
    assert curves["x"][0] == 0 and curves["x"][-1] == 299
    accuracy = body["curves"]["accuracy"]
    assert accuracy["x"] == [0, 1, 2, 3, 4] and accuracy["values"][str(a)] == [None] * 5

    only = client.get(f"/api/series/compare?job={a}&job={b}&metric=loss", headers=ADMIN).json()
    assert only["metrics"] == ["loss"] and list(only["curves"]) == ["loss"]


def test_by_time_each_job_is_aligned_from_its_own_first_point(
    api: tuple[TestClient, Database],
) -> None:
    a, b, curves = _two_losses_compared(api, b_from=1_700_086_400.5, x="time")  # a day later
    assert curves["x"] == [0, 1, 2]
    assert curves["values"] == {str(a): [3.0, 2.0, 1.0], str(b): [5.0, 4.0, None]}
    # each job's first point: where its relative time starts (the page can say when each began)
    assert curves["starts"] == {str(a): 1_700_000_000.0, str(b): 1_700_086_400.5}


def test_by_wall_clock_jobs_lie_side_by_side_as_they_ran(
    api: tuple[TestClient, Database],
) -> None:
    a, b, curves = _two_losses_compared(api, b_from=1_700_000_001.5, x="wall")  # 1.5 s later
    assert curves["x"] == [1_700_000_000.0, 1_700_000_001.0, 1_700_000_001.5, 1_700_000_002.0,
                           1_700_000_002.5]  # fmt: skip
    assert curves["values"] == {
        str(a): [3.0, 2.0, None, 1.0, None],
        str(b): [None, None, 5.0, None, 4.0],
    }
    assert curves["starts"] == {str(a): 1_700_000_000.0, str(b): 1_700_000_001.5}
    client, _ = api
    query = f"/api/series/compare.csv?job={a}&job={b}&metric=loss&x=wall"
    rows = list(csv.reader(io.StringIO(client.get(query, headers=ADMIN).text)))
    assert rows[0][0] == "unix_time" and rows[3] == ["1700000001.5", "", "5.0"]


def test_memory_time_and_loss_like_metrics_are_best_when_lowest(
    api: tuple[TestClient, Database],
) -> None:
    assert [lower_is_better(n) for n in ("val/loss", "peak_mem_bytes", "step_time", "acc")] == [
        True,
        True,
        True,
        False,
    ]
    client, db = api
    (a, attempt), (b, _) = two_jobs(db)
    add_curve(db, attempt, "gpu_mem", [4.0, 2.0, 3.0], t0=0.0)
    add_curve(db, attempt, "tokens_per_s", [4.0, 2.0, 3.0], t0=0.0)
    summary = client.get(f"/api/series/compare?job={a}&job={b}", headers=ADMIN).json()["summary"]
    assert (summary["gpu_mem"][str(a)]["best"], summary["gpu_mem"][str(a)]["best_step"]) == (2, 1)
    assert summary["tokens_per_s"][str(a)]["best"] == 4.0
    assert summary["gpu_mem"][str(b)] == {
        **dict.fromkeys(("final", "final_step", "min", "max", "best", "best_step")),
        "direction": "min",
    }


def test_grad_norm_has_no_best_and_a_declared_direction_wins(
    api: tuple[TestClient, Database],
) -> None:
    client, db = api
    (a, attempt), (b, _) = two_jobs(db)
    add_curve(db, attempt, "grad_norm", [1.0, 9.0, 2.0], t0=0.0)
    add_curve(db, attempt, "val_score", [1.0, 9.0, 2.0], t0=0.0)
    body = client.get(f"/api/series/compare?job={a}&job={b}", headers=ADMIN).json()
    assert body["summary"]["grad_norm"][str(a)]["best"] is None  # its max is not "best"
    assert body["directions"] == {"grad_norm": None, "val_score": "max"}
    with db.session() as session:  # what sdk.declare("val_score", direction="min") sends
        session.add(JobEvent(job_id=a, kind="metric_direction", message="val_score=min"))
    body = client.get(f"/api/series/compare?job={a}&job={b}", headers=ADMIN).json()
    assert body["directions"]["val_score"] == "min"
    assert body["summary"]["val_score"][str(a)]["best"] == 1.0


def test_compare_csv_holds_every_step_of_each_job_aligned(
    api: tuple[TestClient, Database],
) -> None:
    client, db = api
    (a, attempt_a), (b, attempt_b) = two_jobs(db)
    add_points(db, attempt_a, range(0, 5000), ranks=2)
    add_points(db, attempt_b, range(4000, 6000, 2))
    response = client.get(f"/api/series/compare.csv?job={a}&job={b}&metric=loss", headers=ADMIN)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/csv")
    disposition = response.headers["content-disposition"]
    assert f'filename="compare-{a}-{b}-loss.csv"' in disposition
    rows = list(csv.reader(io.StringIO(response.text)))
    header = f"#{a} telemetry-test", f"#{b} telemetry-test"
    assert rows[0] == ["step", *header]
    assert len(rows) == 1 + 5000 + 500  # steps 0..4999, then b's even steps 5000..5998
    assert rows[1] == ["0", str(0.5), ""]  # the mean of ranks 0 and 1 at step 0
    assert rows[4001] == ["4000", str(math.sin(80) + 0.5), str(math.sin(80))]
    assert rows[4002][2] == "" and rows[-1] == ["5998", "", str(math.sin(5998 / 50))]
