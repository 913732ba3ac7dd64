"""Admins set shares and quotas; an over-quota job waits with that reason and its place."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from backend.scheduler.loop import Scheduler
from tests.backend.conftest import bearer
from tests.backend.test_jobs_api import GOOD_SPEC


@pytest.mark.usefixtures("node_n1")
def test_an_admin_sets_limits_and_an_over_quota_job_waits_with_the_reason(
    api: TestClient,
    tokens: dict[str, str],
    scheduler: Scheduler,
) -> None:
    admin, alice = bearer(tokens["admin"]), bearer(tokens["alice"])
    body = {"max_devices": 1, "share": 2}
    assert api.patch("/api/users/alice/limits", json=body, headers=alice).status_code == 403
    limits = api.patch("/api/users/alice/limits", json=body, headers=admin)
    assert limits.status_code == 200, limits.text
    assert limits.json() | {"device_hours_7d": 0} == {
        "user": "alice",
        "share": 2.0,
        "max_devices": 1,
        "max_device_hours": None,
        "device_hours_7d": 0,
        "devices_in_use": 0,
    }
    job = api.post("/api/jobs", json=GOOD_SPEC, headers=alice).json()  # 2 devices
    one = GOOD_SPEC | {"parallelism": {"strategy": "data", "devices": 1}}
    other = api.post("/api/jobs", json=one, headers=admin).json()
    scheduler.tick()
    view = api.get(f"/api/jobs/{job['id']}", headers=alice).json()
    assert view["state"] == "queued"
    assert view["wait_reason"] == "over quota: 0 of 1 devices in use; this job needs 2"
    assert view["queue_position"] == 1  # first in line, held back only by its quota
    assert api.get(f"/api/jobs/{other['id']}", headers=admin).json()["state"] == "scheduled"
    # lifting the quota (null) lets it start
    api.patch("/api/users/alice/limits", json={"max_devices": None}, headers=admin)
    scheduler.tick()
    assert api.get(f"/api/jobs/{job['id']}", headers=alice).json()["state"] == "scheduled"
    listed = {u["user"]: u for u in api.get("/api/users/limits", headers=admin).json()}
    assert listed["alice"]["devices_in_use"] == 2 and listed["alice"]["max_devices"] is None


def test_limits_refusals_name_the_field_or_the_user(
    api: TestClient, tokens: dict[str, str]
) -> None:
    admin = bearer(tokens["admin"])
    refused = api.patch("/api/users/alice/limits", json={"share": 0}, headers=admin)
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "share"]
    missing = api.patch("/api/users/nobody/limits", json={"share": 1}, headers=admin)
    assert missing.status_code == 404 and "nobody" in missing.json()["detail"]


def test_a_boolean_is_not_a_number_of_limits(api: TestClient, tokens: dict[str, str]) -> None:
    admin = bearer(tokens["admin"])
    # before #30: `max_device_hours: false` was taken as a quota of 0 device-hours
    for field in ("share", "max_devices", "max_device_hours"):
        for value in (False, True):
            refused = api.patch("/api/users/alice/limits", json={field: value}, headers=admin)
            assert refused.status_code == 422, (field, value)
            assert refused.json()["detail"][0]["loc"] == ["body", field]
    whole = {"share": 2, "max_devices": 1, "max_device_hours": 5}
    taken = api.patch("/api/users/alice/limits", json=whole, headers=admin)
    assert taken.status_code == 200, taken.text
    assert {k: taken.json()[k] for k in whole} == {
        "share": 2.0,
        "max_devices": 1,
        "max_device_hours": 5.0,
    }
