"""Pause, resume (also on a new device count), clone, drain: through REST with a real scheduler."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from backend.scheduler.loop import Scheduler
from tests.backend.conftest import bearer
from tests.backend.test_jobs_api import GOOD_SPEC, queued_orders


def _running_job(api: TestClient, tokens: dict[str, str], scheduler: Scheduler) -> tuple[int, int]:
    job = api.post("/api/jobs", json=GOOD_SPEC, headers=bearer(tokens["alice"])).json()
    scheduler.tick()
    order = queued_orders(api.app.state.redis, "n1")[-1]  # type: ignore[attr-defined]
    claim = api.post(
        f"/api/attempts/{order['attempt_id']}/claim",
        json={"node": "n1"},
        headers=bearer(tokens["node"]),
    )
    assert claim.status_code == 200
    return job["id"], order["attempt_id"]


def test_pause_then_resume_on_fewer_devices_continues_from_the_checkpoint(
    api: TestClient, tokens: dict[str, str], node_n1: str, scheduler: Scheduler
) -> None:
    alice, node = bearer(tokens["alice"]), bearer(tokens["node"])
    job_id, attempt = _running_job(api, tokens, scheduler)
    assert api.post(f"/api/jobs/{job_id}/pause", headers=alice).json()["state"] == "pausing"
    outcome = {
        "outcome": "stopped",
        "node": "n1",
        "last_checkpoint": "/runs/job-1/checkpoints/step-70",
    }
    assert api.post(f"/api/attempts/{attempt}/finish", json=outcome, headers=node).json() == {
        "state": "paused"
    }

    resumed = api.post(f"/api/jobs/{job_id}/resume", json={"devices": 1}, headers=alice)
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["state"] == "queued"
    assert resumed.json()["spec"]["parallelism"]["devices"] == 1
    scheduler.tick()
    order = queued_orders(api.app.state.redis, "n1")[-1]  # type: ignore[attr-defined]
    assert order["number"] == 2 and len(order["devices"]) == 1
    assert order["resume_from"] == "/runs/job-1/checkpoints/step-70"
    kinds = [e["kind"] for e in api.get(f"/api/jobs/{job_id}/events", headers=alice).json()]
    assert kinds[-3:] == ["paused", "queued", "scheduled"]


def test_resume_refuses_running_jobs_and_bad_device_counts(
    api: TestClient, tokens: dict[str, str], node_n1: str, scheduler: Scheduler
) -> None:
    alice = bearer(tokens["alice"])
    job_id, _ = _running_job(api, tokens, scheduler)
    assert api.post(f"/api/jobs/{job_id}/resume", headers=alice).status_code == 409
    assert (
        api.post(f"/api/jobs/{job_id}/resume", json={"devices": 0}, headers=alice).status_code
        == 422
    )


def test_a_cancelled_job_without_checkpoint_cannot_resume(
    api: TestClient, tokens: dict[str, str]
) -> None:
    alice = bearer(tokens["alice"])
    job = api.post("/api/jobs", json=GOOD_SPEC, headers=alice).json()
    api.post(f"/api/jobs/{job['id']}/cancel", headers=alice)
    refused = api.post(f"/api/jobs/{job['id']}/resume", headers=alice)
    assert refused.status_code == 409 and "clone it instead" in refused.json()["detail"]


def test_clone_merges_changes_and_links_the_parent(api: TestClient, tokens: dict[str, str]) -> None:
    alice = bearer(tokens["alice"])
    parent = api.post("/api/jobs", json=GOOD_SPEC, headers=alice).json()
    changes: dict[str, Any] = {"hyperparameters": {"lr": 0.05}}
    child = api.post(f"/api/jobs/{parent['id']}/clone", json=changes, headers=alice)
    assert child.status_code == 201, child.text
    body = child.json()
    assert body["parent_id"] == parent["id"] and body["name"] == "mlp-dp (clone)"
    assert body["spec"]["hyperparameters"]["lr"] == 0.05
    assert body["spec"]["hyperparameters"]["steps"] == 200  # untouched keys are kept
    bad = api.post(
        f"/api/jobs/{parent['id']}/clone", json={"parallelism": {"devices": -2}}, headers=alice
    )
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"] == ["body", "parallelism", "devices"]
    other = api.post(f"/api/jobs/{parent['id']}/clone", json={}, headers=bearer(tokens["node"]))
    assert other.status_code == 403


def test_drained_node_gets_no_new_jobs_and_the_wait_reason_says_why(
    api: TestClient, tokens: dict[str, str], node_n1: str, scheduler: Scheduler
) -> None:
    admin, alice = bearer(tokens["admin"]), bearer(tokens["alice"])
    assert api.post("/api/nodes/n1/drain", headers=alice).status_code == 403
    assert api.post("/api/nodes/n1/drain", headers=admin).json()["drained"] is True
    job = api.post("/api/jobs", json=GOOD_SPEC, headers=alice).json()
    assert scheduler.tick() == []
    waiting = api.get(f"/api/jobs/{job['id']}", headers=alice).json()
    assert waiting["state"] == "queued" and "no cluster capacity" in waiting["wait_reason"]
    assert api.post("/api/nodes/n1/undrain", headers=admin).json()["drained"] is False
    assert [p.job_id for p in scheduler.tick()] == [job["id"]]
    assert api.post("/api/nodes/ghost/drain", headers=admin).status_code == 404
