"""Sweeps through REST on a real database: trials within max-concurrency, cancel, refusals,
and the early-stopping pass stopping a poor trial at a rung with an event saying why."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import select

from backend.config import Settings
from backend.db import Database
from backend.deployment_keys import keys_of
from backend.jobs import attempts
from backend.jobs import service as jobs_service
from backend.jobs.models import Attempt, AttemptSlice, Job, JobEvent
from backend.jobs.states import JobState
from backend.sweeps import service as sweeps
from backend.sweeps.loop import judge_moved, pass_once
from backend.sweeps.models import Sweep
from backend.telemetry.ingest.consumer import Ingest
from tests.backend.conftest import bearer
from tests.backend.test_jobs_api import GOOD_SPEC
from tests.telemetry.helpers import insert_points
from workers.contract.protocol import BATCH_FIELD, METRICS_STREAM, AttemptOutcome, StopRequest

LRS = [0.1, 0.05, 1e-6, 0.02]


def sweep_body(**changes: Any) -> dict[str, Any]:
    base = {**GOOD_SPEC, "parallelism": {"devices": 1}}
    return {
        "name": "lr-search",
        "base": base,
        "method": "grid",
        "parameters": {"hyperparameters.lr": {"values": LRS}},
        "max_concurrency": 2,
        "early_stopping": {"rule": "asha", "rungs": [10, 20], "reduction_factor": 2},
        **changes,
    }


def _create(api: TestClient, token: str, **changes: Any) -> dict[str, Any]:
    response = api.post("/api/sweeps", json=sweep_body(**changes), headers=bearer(token))
    assert response.status_code == 201, response.text
    return dict(response.json())


def test_a_sweep_launches_trials_within_max_concurrency(
    api: TestClient, tokens: dict[str, str]
) -> None:
    sweep = _create(api, tokens["alice"])
    assert [t["state"] for t in sweep["trials"]] == ["queued", "queued", "pending", "pending"]
    assert {t["phase"] for t in sweep["trials"]} == {"waiting"}  # the browser counts by phase
    assert [t["setting"]["hyperparameters.lr"] for t in sweep["trials"]] == LRS
    job = api.get(
        f"/api/jobs/{sweep['trials'][0]['job_id']}", headers=bearer(tokens["alice"])
    ).json()
    assert (job["name"], job["sweep_id"], job["sweep_trial"]) == ("lr-search #1", sweep["id"], 1)
    assert job["spec"]["hyperparameters"]["lr"] == 0.1


def test_cancelling_a_sweep_cancels_its_trials_and_starts_no_more(
    api: TestClient, tokens: dict[str, str], database: Database, settings: Settings
) -> None:
    alice = bearer(tokens["alice"])
    sweep = _create(api, tokens["alice"])
    cancelled = api.post(f"/api/sweeps/{sweep['id']}/cancel", headers=alice).json()
    assert cancelled["state"] == "cancelled"
    assert [t["state"] for t in cancelled["trials"]] == [
        "cancelled",
        "cancelled",
        "pending",
        "pending",
    ]
    pass_once(database, redis.Redis.from_url(settings.redis_url), script_roots=[])
    again = api.get(f"/api/sweeps/{sweep['id']}", headers=alice).json()
    assert [t["job_id"] is None for t in again["trials"]] == [False, False, True, True]
    assert api.post(f"/api/sweeps/{sweep['id']}/cancel", headers=alice).status_code == 409


def test_someone_elses_sweep_looks_missing(api: TestClient, tokens: dict[str, str]) -> None:
    sweep = _create(api, tokens["admin"])
    theirs = api.get(f"/api/sweeps/{sweep['id']}", headers=bearer(tokens["alice"]))
    assert theirs.status_code == 404 and theirs.json()["detail"] == f"sweep {sweep['id']} not found"
    assert api.get("/api/sweeps", headers=bearer(tokens["alice"])).json()["sweeps"] == []


def test_refusals_name_the_field(api: TestClient, tokens: dict[str, str]) -> None:
    def refused(body: dict[str, Any]) -> tuple[list[Any], str]:
        response = api.post("/api/sweeps", json=body, headers=bearer(tokens["alice"]))
        assert response.status_code == 422, response.text
        error = response.json()["detail"][0]
        return list(error["loc"]), error["msg"]

    loc, msg = refused(sweep_body(parameters={"hyperparameters.lr": {"values": [0.1, -1]}}))
    assert loc == ["body", "parameters", "hyperparameters.lr"] and "trial 2" in msg
    loc, _ = refused(sweep_body(parameters={"no such/path": {"values": [1]}}))
    assert loc[:2] == ["body", "parameters"]
    loc, msg = refused(sweep_body(parameters={"hyperparameters.lr": {"min": 0.1, "max": 1}}))
    assert loc == ["body", "parameters"] and "needs steps" in msg
    loc, _ = refused(sweep_body(base={**GOOD_SPEC, "template": "nope"}))
    assert loc[:3] == ["body", "base", "template"]
    loc, _ = refused(sweep_body(max_concurrency=0))
    assert loc == ["body", "max_concurrency"]


def test_a_grid_over_the_cap_is_refused_at_once_naming_its_size_and_the_cap(
    api: TestClient, tokens: dict[str, str], database: Database
) -> None:
    """6 × 32 values (2^30 points) with trials 4: was expanded in full (memory ran out)."""
    grid = {f"hyperparameters.p{i}": {"values": list(range(32))} for i in range(6)}
    started = time.perf_counter()
    response = api.post(
        "/api/sweeps", json=sweep_body(parameters=grid, trials=4), headers=bearer(tokens["alice"])
    )
    assert time.perf_counter() - started < 2.0
    assert response.status_code == 422, response.text
    error = response.json()["detail"][0]
    assert error["loc"] == ["body", "parameters"]
    assert "1,073,741,824 points" in error["msg"] and "the cap is 4,096 points" in error["msg"]
    with database.session() as session:
        assert session.scalars(select(Job)).all() == []


def _two_running(
    api: TestClient, token: str, database: Database, steps: tuple[int, int] = (12, 12)
) -> tuple[dict[str, Any], int, int, dict[int, int]]:
    """A new sweep, its first two trials running at `steps`: (sweep, first, second, runs)
    where runs maps each trial's job id to its attempt id."""
    sweep = _create(api, token)
    first, second = (t["job_id"] for t in sweep["trials"][:2])
    runs = {
        job: _run(database, job, step=step)
        for job, step in zip((first, second), steps, strict=True)
    }
    return sweep, first, second, runs


def _losses(curves: dict[int, Callable[[int], float]], steps: range) -> list[dict[str, Any]]:
    """Rank 0's loss point at each step of `steps`, per attempt id, from its curve."""
    return [
        {"attempt_id": attempt, "rank": 0, "step": s, "name": "loss", "value": f(s), "time": s}
        for attempt, f in curves.items()
        for s in steps
    ]


def _trial(api: TestClient, token: str, sweep_id: int, index: int) -> dict[str, Any]:
    view = api.get(f"/api/sweeps/{sweep_id}", headers=bearer(token)).json()
    return dict(view["trials"][index])


def _run(db: Database, job_id: int, *, step: int) -> int:
    """Put a queued trial on node n1 as running at `step`; its attempt id."""
    with db.session() as session:
        job = session.get_one(Job, job_id)
        attempt = Attempt(job_id=job_id, number=1, node_name="n1", devices=[0], master_port=1)
        attempt.state = "running"
        session.add(attempt)
        session.flush()
        session.add(
            AttemptSlice(
                attempt_id=attempt.id, node_name="n1", node_rank=0, devices=[0], state="running"
            )
        )
        job.state, job.attempt, job.step = "running", 1, step
        session.commit()
        return attempt.id


def flat_losses(db: Database, curves: dict[int, tuple[float, int]]) -> None:
    """Store, per attempt id, one loss value at steps 1 to its last step (rank 0)."""
    for attempt, (value, last) in curves.items():
        insert_points(db, _losses({attempt: _flat(value)}, range(1, last + 1)))


def _flat(value: float) -> Callable[[int], float]:
    """A curve that learns nothing: `value` at every step."""
    return lambda _: value


def test_a_poor_trial_is_stopped_at_a_rung_with_the_reason(
    api: TestClient, tokens: dict[str, str], database: Database, settings: Settings
) -> None:
    client = redis.Redis.from_url(settings.redis_url)
    sweep, good, flat, runs = _two_running(api, tokens["alice"], database)
    curve = {runs[good]: lambda s: 2.0 / (s + 1), runs[flat]: lambda s: 2.3}  # flat: learns nothing
    insert_points(database, _losses(curve, range(1, 13)))
    pass_once(database, client, script_roots=[])
    with database.session() as session:
        events = session.scalars(
            select(JobEvent).where(JobEvent.kind.in_(["rung", "early_stopped"]))
        ).all()
        by_job = {e.job_id: e for e in events}
        assert by_job[good].kind == "rung" and by_job[good].step == 10
        assert by_job[flat].kind == "early_stopped" and by_job[flat].step == 10
        assert by_job[flat].message == (
            "stopped early at rung 1 (step 10): loss 2.3 > threshold 1.241"
            " (ASHA: best 1/2 of 2 trials at this rung)"
        )
        assert session.get_one(Job, flat).state == "cancelling"
    with database.session() as session:  # its ranks stop: the trial ends as stopped, not failed
        attempts.finish(
            session,
            client,
            attempt_id=runs[flat],
            node="n1",
            outcome=AttemptOutcome(outcome="stopped"),
        )
    view = api.get(f"/api/sweeps/{sweep['id']}", headers=bearer(tokens["alice"])).json()
    trial = view["trials"][1]
    assert trial["state"] == "stopped" and trial["early_stop"].startswith("stopped early at rung 1")
    assert trial["phase"] == "finished"
    assert trial["rungs"] == {"10": 2.3}
    assert view["best"]["number"] == 1 and view["best"]["value"] == 2.0 / 13
    job = api.get(f"/api/jobs/{flat}", headers=bearer(tokens["alice"])).json()
    assert job["state"] == "stopped" and job["reason"].startswith("stopped early")
    pass_once(database, client, script_roots=[])  # a slot is free: trial 3 starts
    assert _trial(api, tokens["alice"], sweep["id"], 2)["state"] == "queued"


def test_the_first_trial_at_a_rung_waits_to_be_judged_until_a_second_arrives(
    api: TestClient, tokens: dict[str, str], database: Database, settings: Settings
) -> None:
    client = redis.Redis.from_url(settings.redis_url)
    _, flat, good, runs = _two_running(api, tokens["alice"], database, steps=(0, 0))

    def report(job: int, attempt: int, steps: range, value: float) -> None:
        insert_points(database, _losses({attempt: _flat(value)}, steps))
        with database.session() as session:
            session.get_one(Job, job).step = steps[-1]
            session.commit()

    report(flat, runs[flat], range(1, 13), 2.3)  # ahead, alone at rung 10
    report(good, runs[good], range(1, 6), 0.5)
    pass_once(database, client, script_roots=[])
    with database.session() as session:
        assert (
            session.scalars(
                select(JobEvent).where(JobEvent.kind.in_(["rung", "early_stopped"]))
            ).all()
            == []
        )
    report(good, runs[good], range(6, 13), 0.4)  # the second one reaches the rung
    pass_once(database, client, script_roots=[])
    with database.session() as session:
        kinds = dict(
            session.execute(select(JobEvent.job_id, JobEvent.kind).where(JobEvent.step == 10))
            .tuples()
            .all()
        )
        assert session.get_one(Job, flat).state == "cancelling"
    assert kinds == {flat: "early_stopped", good: "rung"}


def test_a_trial_is_judged_as_its_points_are_stored_not_on_the_next_pass(
    api: TestClient, tokens: dict[str, str], database: Database, settings: Settings
) -> None:
    """The ingest judges the trials whose points it just committed: no sweeps pass runs."""
    client = redis.Redis.from_url(settings.redis_url)
    _, good, flat, runs = _two_running(api, tokens["alice"], database, steps=(0, 0))
    ingest = Ingest(
        db=database,
        client=client,
        consumer="judge",
        on_progress=lambda moved: judge_moved(database, client, moved),
    )
    ingest.ensure_groups()
    curve = {runs[good]: lambda s: 2.0 / (s + 1), runs[flat]: lambda s: 2.3}
    batch = {"producer": "test", "seq": 0, "items": _losses(curve, range(1, 13))}
    client.xadd(keys_of(client).streams()[METRICS_STREAM], {BATCH_FIELD: json.dumps(batch)})
    ingest.consume()
    with database.session() as session:
        flat_job = session.get_one(Job, flat)
        assert flat_job.state == "cancelling" and flat_job.step == 12
        assert flat_job.early_stop is not None and "rung 1 (step 10)" in flat_job.early_stop


def test_a_trial_that_finished_before_its_verdict_took_effect_reads_succeeded_only(
    api: TestClient, tokens: dict[str, str], database: Database, settings: Settings
) -> None:
    """State and verdict never disagree: its ranks ended all steps as the stop arrived."""
    client = redis.Redis.from_url(settings.redis_url)
    sweep, good, flat, runs = _two_running(api, tokens["alice"], database)
    flat_losses(database, {runs[good]: (0.5, 12), runs[flat]: (2.3, 12)})
    pass_once(database, client, script_roots=[])
    with database.session() as session:
        report = AttemptOutcome(outcome="succeeded")
        attempts.finish(session, client, attempt_id=runs[flat], node="n1", outcome=report)
    trial = _trial(api, tokens["alice"], sweep["id"], 1)
    assert trial["state"] == "succeeded" and trial["early_stop"] is None
    events = api.get(f"/api/jobs/{flat}/events", headers=bearer(tokens["alice"])).json()
    assert events[-1]["message"] == "attempt 1 finished all steps before its early stop took effect"


def test_the_best_trial_is_one_that_ran_every_step_once_one_has(
    api: TestClient, tokens: dict[str, str], database: Database, settings: Settings
) -> None:
    """A trial stopped early ends on an earlier, noisier value: it is no measure of the best."""
    client = redis.Redis.from_url(settings.redis_url)
    sweep, done, stopped, runs = _two_running(api, tokens["alice"], database, steps=(12, 6))
    flat_losses(database, {runs[done]: (0.5, 12), runs[stopped]: (0.1, 6)})

    def best() -> int:
        view = api.get(f"/api/sweeps/{sweep['id']}", headers=bearer(tokens["alice"])).json()
        return int(view["best"]["job_id"])

    assert best() == stopped  # none has finished: the best so far, running ones included
    with database.session() as session:
        for job_id, outcome in ((stopped, "stopped"), (done, "succeeded")):
            if outcome == "stopped":
                job = session.get_one(Job, job_id)
                job.state, job.stop_request = "cancelling", StopRequest.cancel
                session.commit()
            report = AttemptOutcome(outcome=outcome)  # type: ignore[arg-type]
            attempts.finish(session, client, attempt_id=runs[job_id], node="n1", outcome=report)
    assert best() == done


def test_two_launches_at_once_submit_each_trial_once(
    api: TestClient,
    tokens: dict[str, str],
    database: Database,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sweep's creation and the sweeps loop (woken by its first trial) may launch at the
    same moment; the next trials are still submitted once each."""
    client = redis.Redis.from_url(settings.redis_url)
    sweep_id = _create(api, tokens["alice"])["id"]  # trials 1 and 2 queued
    with database.session() as session:
        for job in sweeps.trials_of(session, sweep_id):
            job.state = JobState.succeeded  # both ended: a launch now submits trials 3 and 4
    submit = jobs_service.submit

    def slow_submit(*args: Any, **kwargs: Any) -> Job:
        time.sleep(0.3)  # between reading which trials exist and committing the next one
        return submit(*args, **kwargs)

    monkeypatch.setattr(jobs_service, "submit", slow_submit)

    def launch() -> None:
        with database.session() as session:
            sweep = session.get_one(Sweep, sweep_id)
            sweeps.launch(session, client, sweep=sweep, script_roots=[])

    launches = [threading.Thread(target=launch) for _ in range(2)]
    for thread in launches:
        thread.start()
    for thread in launches:
        thread.join(30)
    with database.session() as session:
        numbers = [job.sweep_trial for job in sweeps.trials_of(session, sweep_id)]
    assert numbers == [1, 2, 3, 4]
