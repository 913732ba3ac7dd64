"""The run table: summaries kept by the summarizer, and one query that sorts, filters and groups."""

from __future__ import annotations

import statistics
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from backend.auth.service import Principal
from backend.db import Database
from backend.jobs.models import Job, JobEvent
from backend.runtable import service
from backend.telemetry.models import MetricSummary
from backend.telemetry.series.cache import SeriesCache
from backend.telemetry.series.curves import direction
from backend.telemetry.series.summaries import Summarizer
from tests.telemetry.helpers import ADMIN, add_attempt
from tests.telemetry.test_compare import add_curve
from workers.contract.telemetry_channel import direction_message, parse_direction

ADMIN_PRINCIPAL = Principal(
    user_id=0,
    username="admin",
    role="admin",
    scopes=frozenset({"read", "admin"}),
    token_id=0,
    kind="t",
)


def table(database: Database, **query: Any) -> dict[str, Any]:
    """A page of the run table as the admin sees it."""
    with database.session() as session:
        return service.table(session, principal=ADMIN_PRINCIPAL, query=service.RunQuery(**query))


def seeded_run(
    db: Database, *, lr: float, seed: int, losses: list[float], tags: list[str], state: str
) -> int:
    """A job with lr and seed set, its loss curve and a grad_norm curve; its id."""
    job_id, attempt = add_attempt(db, state=state)
    with db.session() as session:
        job = session.get_one(Job, job_id)
        job.spec = {**job.spec, "hyperparameters": {"lr": lr, "seed": seed}, "tags": tags}
        job.name = f"lr{lr}-seed{seed}"
    add_curve(db, attempt, "loss", losses, t0=0.0)
    add_curve(db, attempt, "grad_norm", [1.0, 9.0, 2.0], t0=0.0)
    return job_id


@pytest.fixture
def nine_runs(database: Database) -> dict[tuple[float, int], int]:
    """Three learning rates × three seeds, summarised; (lr, seed) → job id."""
    runs = {}
    for lr in (0.1, 0.01, 0.001):
        for seed in range(3):
            final = lr * 10 + seed * 0.01  # lr 0.001 is best, seeds spread by 0.01
            runs[(lr, seed)] = seeded_run(
                database,
                lr=lr,
                seed=seed,
                losses=[5.0, final - 0.05, final],
                tags=["sweep-a"] if lr != 0.1 else [],
                state="succeeded" if seed < 2 else "failed",
            )
    assert Summarizer(database, SeriesCache()).run_once() == 18
    return runs


def test_summaries_match_compare_and_follow_the_direction_rule(
    database: Database, nine_runs: dict[tuple[float, int], int]
) -> None:
    job = nine_runs[(0.01, 1)]
    with database.session() as session:
        rows = {
            s.name: s
            for s in session.scalars(select(MetricSummary).where(MetricSummary.job_id == job))
        }
    assert rows["loss"].final == pytest.approx(0.11) and rows["loss"].final_step == 2
    assert rows["loss"].best == pytest.approx(0.06) and rows["loss"].direction == "min"
    # a gradient norm has no best end: its maximum is not ranked "best"
    assert rows["grad_norm"].best is None and rows["grad_norm"].direction is None
    assert rows["grad_norm"].max == 9.0
    assert [direction(n) for n in ("loss_scale", "lr", "val_acc", "step_time")] == [
        None,
        None,
        "max",
        "min",
    ]
    # nothing changed: the next pass writes nothing
    assert Summarizer(database, SeriesCache()).run_once() == 0


def test_a_declared_direction_wins_over_the_name(
    database: Database, nine_runs: dict[tuple[float, int], int]
) -> None:
    job = nine_runs[(0.1, 0)]
    summarizer = Summarizer(database, SeriesCache())
    summarizer.run_once()
    with database.session() as session:
        session.add(JobEvent(job_id=job, kind="metric_direction", message="grad_norm=max"))
    assert summarizer.run_once() == 1
    with database.session() as session:
        row = session.scalars(
            select(MetricSummary).where(
                MetricSummary.job_id == job, MetricSummary.name == "grad_norm"
            )
        ).one()
    assert (row.best, row.best_step, row.direction) == (9.0, 1, "max")


def test_the_table_sorts_filters_and_pages_by_settings_and_metrics(
    database: Database, nine_runs: dict[tuple[float, int], int]
) -> None:
    page = table(
        database,
        columns=["hyperparameters.lr", "hyperparameters.seed"],
        metrics=["loss"],
        sort="final:loss",
        limit=4,
    )
    assert page["total"] == 9
    assert [r["settings"] for r in page["rows"]] == [
        {"hyperparameters.lr": 0.001, "hyperparameters.seed": s} for s in range(3)
    ] + [{"hyperparameters.lr": 0.01, "hyperparameters.seed": 0}]
    assert page["rows"][0]["metrics"]["loss"]["final"] == pytest.approx(0.01)
    assert page["directions"] == {"loss": "min"}
    assert {"hyperparameters.lr", "hyperparameters.seed", "template"} <= set(page["setting_paths"])
    assert page["metric_names"] == ["grad_norm", "loss"]
    filtered = table(
        database,
        columns=["hyperparameters.lr"],
        sort="-spec:hyperparameters.lr",
        states=["succeeded"],
        tag="sweep-a",
        text="seed1",
    )
    assert [r["job"].id for r in filtered["rows"]] == [nine_runs[(0.01, 1)], nine_runs[(0.001, 1)]]


def test_grouping_by_a_setting_gives_mean_and_spread_across_seeds(
    database: Database, nine_runs: dict[tuple[float, int], int]
) -> None:
    page = table(
        database, metrics=["loss"], sort="spec:hyperparameters.lr", group="hyperparameters.lr"
    )
    groups = page["groups"]
    assert [(g["value"], g["count"]) for g in groups] == [(0.001, 3), (0.01, 3), (0.1, 3)]
    finals = [0.1 + s * 0.01 for s in range(3)]
    spread = groups[1]["metrics"]["loss"]["final"]
    assert spread["mean"] == pytest.approx(statistics.fmean(finals))
    assert spread["std"] == pytest.approx(statistics.stdev(finals))
    assert (spread["min"], spread["max"], spread["n"]) == (
        pytest.approx(0.1),
        pytest.approx(0.12),
        3,
    )


def test_the_route_refuses_a_bad_path_naming_the_parameter(
    api: tuple[TestClient, Database],
) -> None:
    client, db = api
    add_attempt(db)
    answer = client.get("/api/runs?column=hyperparameters..lr", headers=ADMIN)
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["query", "columns"]
    answer = client.get("/api/runs?sort=final:", headers=ADMIN)
    assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["query", "sort"]
    body = client.get("/api/runs?column=hyperparameters.lr", headers=ADMIN).json()
    assert body["total"] == 1 and body["rows"][0]["settings"] == {"hyperparameters.lr": 0.1}


def test_the_sdk_declaration_is_an_event_the_backend_reads_back() -> None:
    message = direction_message("val_acc", "max")
    assert message == {"e": {"kind": "metric_direction", "message": "val_acc=max", "step": None}}
    assert parse_direction(message["e"]["message"]) == ("val_acc", "max")
    assert parse_direction("a=b=none") == ("a=b", "none") and parse_direction("x=up") is None
    with pytest.raises(ValueError, match="direction must be one of min, max, none"):
        direction_message("val_acc", "higher")


def test_archived_jobs_are_hidden_unless_asked_and_a_sweep_and_notes_filter(
    database: Database, nine_runs: dict[tuple[float, int], int]
) -> None:
    archived, noted = nine_runs[(0.1, 0)], nine_runs[(0.1, 1)]
    with database.session() as session:
        session.get_one(Job, archived).archived = True
        session.get_one(Job, noted).notes = "Diverged: **bad** init"

    def ids(**kw: Any) -> list[int]:
        return sorted(r["job"].id for r in table(database, **kw)["rows"])

    assert archived not in ids() and len(ids()) == 8
    assert ids(archived="only") == [archived]
    assert len(ids(archived="all")) == 9
    assert ids(text="diverged") == [noted]  # in the notes, not the name
    assert ids(sweep=12345) == []


def test_a_changed_spec_is_sorted_and_grouped_by_its_new_value(
    database: Database, nine_runs: dict[tuple[float, int], int]
) -> None:
    by_lr = {"sort": "spec:hyperparameters.lr", "columns": ["hyperparameters.lr"], "limit": 1}
    assert table(database, **by_lr)["rows"][0]["settings"] == {"hyperparameters.lr": 0.001}
    moved = nine_runs[(0.1, 2)]
    with database.session() as session:  # its row changes, so its updated_at moves
        job = session.get_one(Job, moved)
        job.spec = {**job.spec, "hyperparameters": {"lr": 0.0001, "seed": 2}}
    page = table(database, **by_lr, group="hyperparameters.lr")
    assert page["rows"][0]["job"].id == moved
    assert [(g["value"], g["count"]) for g in page["groups"]] == [
        (0.0001, 1),
        (0.001, 3),
        (0.01, 3),
        (0.1, 2),
    ]
