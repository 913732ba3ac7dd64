"""`/api/usage`: device-seconds allocated and busy, against attempts of known durations."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from backend.auth.models import User
from backend.config import Settings
from backend.db import Database
from backend.jobs.models import Attempt, AttemptSlice, Job
from backend.telemetry.models import DeviceSample
from backend.usage.accounting import device_hours_since, settle
from backend.usage.models import AllocationStart, SlurmUsage
from tests.backend.conftest import bearer
from tests.backend.test_jobs_api import GOOD_SPEC

#: alice's attempt runs 23:30 to 00:30 on 2 devices at 50 %; the admin's 00:00 to 01:00 on 1
T0 = datetime(2026, 1, 1, 23, 30, tzinfo=UTC)
HOUR = timedelta(hours=1)


def ended_attempt(
    session: Any, owner: str, *, node: str, devices: list[int], start: datetime, end: datetime
) -> Attempt:
    """A succeeded job of `owner` with one attempt that held `devices` from start to end."""
    user = session.scalars(select(User).where(User.username == owner)).one()
    job = Job(
        name="j",
        owner_id=user.id,
        state="succeeded",
        spec=GOOD_SPEC,
        devices_requested=len(devices),
    )
    session.add(job)
    session.flush()
    attempt = Attempt(
        job_id=job.id,
        number=1,
        node_name=node,
        devices=devices,
        state="succeeded",
        master_port=0,
        owner_id=user.id,
        device_count=len(devices),
        created_at=start,
        claimed_at=start,
        finished_at=end,
    )
    session.add(attempt)
    session.flush()
    session.add(
        AttemptSlice(
            attempt_id=attempt.id, node_name=node, node_rank=0, devices=devices, state="succeeded"
        )
    )
    return attempt


def add_samples(
    session: Any,
    attempt: Attempt,
    *,
    start: datetime,
    minutes: Iterable[int],
    util: Callable[[int, int], float],
) -> None:
    """CPU samples of each of the attempt's devices (its rank too) at these minutes after
    start, busy util(device, minute) %."""
    session.add_all(
        DeviceSample(
            node=attempt.node_name,
            device=device,
            kind="cpu",
            time=(start + timedelta(minutes=m)).timestamp(),
            util=util(device, m),
            attempt_id=attempt.id,
            rank=device,
        )
        for device in attempt.devices
        for m in minutes
    )


@pytest.fixture
def two_attempts(database: Database, tokens: dict[str, str]) -> tuple[int, int]:
    with database.session() as session:
        alices = ended_attempt(session, "alice", node="n1", devices=[0, 1], start=T0, end=T0 + HOUR)
        admins = ended_attempt(
            session, "admin", node="n2", devices=[0], start=T0 + HOUR / 2, end=T0 + 1.5 * HOUR
        )
        # every minute of alice's hour, 50 % busy (>100 % counts as 100)
        add_samples(
            session,
            alices,
            start=T0,
            minutes=range(60),
            util=lambda device, m: 50.0 if m % 2 else 150.0 if device else 50.0,
        )
        session.commit()
        return alices.id, admins.id


def _usage(api: TestClient, token: str, **params: str) -> dict[str, Any]:
    response = api.get("/api/usage", params=params, headers=bearer(token))
    assert response.status_code == 200, response.text
    return response.json()


def _rows(body: dict[str, Any]) -> dict[str, tuple[float, float]]:
    return {
        r["key"]: (round(r["allocated_device_seconds"]), round(r["busy_device_seconds"]))
        for r in body["rows"]
    }


def test_usage_totals_match_the_attempts_durations(
    api: TestClient, tokens: dict[str, str], two_attempts: tuple[int, int]
) -> None:
    window = {"from": (T0 - HOUR).isoformat(), "to": (T0 + 3 * HOUR).isoformat()}
    alice_busy = round(3600 * (0.5 + 0.75))  # device 0 at 50 %, device 1 at 75 % (capped)
    by_user = _usage(api, tokens["admin"], by="user", **window)
    assert _rows(by_user) == {"alice": (7200, alice_busy), "admin": (3600, 0)}
    assert round(by_user["total"]["allocated_device_seconds"]) == 10800
    assert by_user["total"]["attempts"] == 2 and by_user["from"] == "2026-01-01T22:30:00Z"
    alice_job, admin_job = (str(a) for a in _job_ids(api, tokens))
    assert _rows(_usage(api, tokens["admin"], by="job", **window)) == {
        alice_job: (7200, alice_busy),
        admin_job: (3600, 0),
    }
    assert _rows(_usage(api, tokens["admin"], by="node", **window)) == {
        "n1": (7200, alice_busy),
        "n2": (3600, 0),
    }
    # a window cuts attempts at its edges: 00:00-00:30 holds half of each hour-long attempt
    half = {"from": (T0 + HOUR / 2).isoformat(), "to": (T0 + HOUR).isoformat()}
    assert _rows(_usage(api, tokens["admin"], **half)) == {
        "alice": (3600, round(alice_busy / 2)),
        "admin": (1800, 0),
    }
    # a user sees only their own usage
    assert _rows(_usage(api, tokens["alice"], **window)) == {"alice": (7200, alice_busy)}


def _job_ids(api: TestClient, tokens: dict[str, str]) -> list[int]:
    jobs = api.get("/api/jobs", headers=bearer(tokens["admin"])).json()["jobs"]
    return sorted(j["id"] for j in jobs)


def test_daily_usage_splits_attempts_at_midnight(
    api: TestClient, tokens: dict[str, str], two_attempts: tuple[int, int]
) -> None:
    params = {"from": (T0 - HOUR).isoformat(), "to": (T0 + 3 * HOUR).isoformat()}
    response = api.get("/api/usage/daily", params=params, headers=bearer(tokens["admin"]))
    rows = {
        (r["day"], r["user"]): round(r["allocated_device_seconds"]) for r in response.json()["rows"]
    }
    assert rows == {
        ("2026-01-01", "alice"): 3600,  # 23:30-00:00 on 2 devices
        ("2026-01-02", "alice"): 3600,
        ("2026-01-02", "admin"): 3600,
    }


def test_settled_attempts_record_allocated_and_busy_device_seconds(
    database: Database, two_attempts: tuple[int, int]
) -> None:
    with database.session() as session:
        assert settle(session) == 2
        session.commit()
        alices, admins = (session.get_one(Attempt, a) for a in two_attempts)
        assert alices.allocated_device_seconds == pytest.approx(7200)
        assert alices.busy_device_seconds == pytest.approx(3600 * 1.25)
        assert admins.allocated_device_seconds == pytest.approx(3600)
        assert admins.busy_device_seconds is None  # no samples: not measured
        assert settle(session) == 0


@pytest.mark.parametrize(
    "params",
    [
        {"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
        {"from": "2024-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
        {"from": "yesterday"},
        {"from": "1.175494351e-38", "to": "500"},  # numbers are not date-times (schemathesis)
        {"to": "1764028800"},
        {"by": "team"},
    ],
)
def test_bad_usage_queries_are_refused_naming_the_parameter(
    api: TestClient, tokens: dict[str, str], params: dict[str, str]
) -> None:
    response = api.get("/api/usage", params=params, headers=bearer(tokens["admin"]))
    assert response.status_code == 422
    assert str(response.json()["detail"][0]["loc"][-1]) in params


def test_under_slurm_the_usage_view_shows_slurms_accounting_beside_trainboards(
    api: TestClient,
    settings: Settings,
    database: Database,
    tokens: dict[str, str],
    two_attempts: tuple[int, int],
) -> None:
    alices, _ = two_attempts
    window = {"from": (T0 - HOUR).isoformat(), "to": (T0 + 3 * HOUR).isoformat()}
    node_pool = _usage(api, tokens["admin"], **window)
    assert all(r["slurm_allocated_device_seconds"] is None for r in node_pool["rows"])
    settings.executor = "slurm"
    with database.session() as session:  # what the Slurm executor read from sacct
        session.add(
            SlurmUsage(
                attempt_id=alices,
                slurm_job_id="41",
                state="COMPLETED",
                runs=1,
                elapsed_seconds=3618,
                allocated_device_seconds=7236,
            )
        )
        session.commit()
    body = _usage(api, tokens["admin"], by="user", **window)
    rows = {r["key"]: r for r in body["rows"]}
    assert rows["alice"]["slurm_allocated_device_seconds"] == pytest.approx(7236)
    assert (rows["alice"]["attempts"], rows["alice"]["slurm_accounted_attempts"]) == (1, 1)
    # the admin's attempt has no Slurm record (yet): 0 of its 1 attempt accounted
    assert (
        rows["admin"]["slurm_allocated_device_seconds"],
        rows["admin"]["slurm_accounted_attempts"],
    ) == (0, 0)
    assert body["total"]["slurm_accounted_attempts"] == 1
    # the window's edge cuts Slurm's figure as it cuts Trainboard's: half of alice's hour
    half = {"from": (T0 + HOUR / 2).isoformat(), "to": (T0 + HOUR).isoformat()}
    [alice_half] = [r for r in _usage(api, tokens["alice"], **half)["rows"]]
    assert alice_half["slurm_allocated_device_seconds"] == pytest.approx(7236 / 2)
    daily = api.get("/api/usage/daily", params=window, headers=bearer(tokens["admin"])).json()
    slurm_days = {
        (r["day"], r["user"]): round(r["slurm_allocated_device_seconds"]) for r in daily["rows"]
    }
    assert slurm_days[("2026-01-01", "alice")] + slurm_days[("2026-01-02", "alice")] == 7236
    assert slurm_days[("2026-01-01", "alice")] == 7236 / 2  # 23:30-00:00 of 23:30-00:30


def test_under_slurm_an_attempt_is_allocated_from_its_allocations_start_not_its_claim(
    api: TestClient, database: Database, tokens: dict[str, str], two_attempts: tuple[int, int]
) -> None:
    """Slurm holds the job's devices from its allocation's start, while the batch shell, srun
    and the supervisor start: allocated counts from there, busy only from the claim (the
    device samples begin there), and quotas count the same span."""
    alices, _ = two_attempts
    with database.session() as session:
        attempt = session.get_one(Attempt, alices)
        attempt.claimed_at = T0 + timedelta(seconds=6)  # the claim, 6 s into the allocation
        session.add(AllocationStart(attempt_id=alices, started_at=T0))
        # an attempt Slurm allocated whose supervisor never claimed: held 4 s on 1 device
        never = ended_attempt(session, "alice", node="n1", devices=[0], start=T0, end=T0)
        never.claimed_at, never.finished_at = None, T0 + timedelta(seconds=4)
        session.add(AllocationStart(attempt_id=never.id, started_at=T0))
        session.commit()
    window = {"from": (T0 - HOUR).isoformat(), "to": (T0 + 3 * HOUR).isoformat()}
    alice_busy = (3600 - 6) * (0.5 + 0.75)  # sampled from the claim on
    by_user = {r["key"]: r for r in _usage(api, tokens["admin"], by="user", **window)["rows"]}
    assert by_user["alice"]["allocated_device_seconds"] == pytest.approx(7200 + 4)
    assert by_user["alice"]["busy_device_seconds"] == pytest.approx(alice_busy, rel=1e-3)
    assert by_user["alice"]["attempts"] == 2
    with database.session() as session:
        assert settle(session) == 3
        session.commit()
        assert session.get_one(Attempt, alices).allocated_device_seconds == pytest.approx(7200)
        alice = session.scalars(select(User).where(User.username == "alice")).one()
        hours = device_hours_since(session, [alice.id], since=T0 - HOUR, now=T0 + 3 * HOUR)
        assert hours[alice.id] == pytest.approx((7200 + 4) / 3600)
