"""Submitting, reading and cancelling jobs through REST; specs refused with the field named."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from backend.config import Settings
from backend.db import Database
from backend.deployment_keys import keys_of
from backend.jobs.states import FINAL, PHASES, JobPhase, JobState
from tests.backend.conftest import bearer, node_pool_scheduler
from tests.specs import with_field
from workers.contract.protocol import NodeDevice, NodeRegistration

GOOD_SPEC: dict[str, Any] = {
    "name": "mlp-dp",
    "template": "mlp",
    "parallelism": {"strategy": "data", "devices": 2},
    "hyperparameters": {"steps": 200, "batch_size": 32, "lr": 0.01},
    "checkpoint": {"every_steps": 50},
}


def queued_orders(client: redis.Redis, node: str) -> list[dict[str, Any]]:
    """The AttemptOrders waiting in a node's Celery queue, read straight from Redis."""
    orders = []
    for raw in reversed(client.lrange(keys_of(client).node_queue(node), 0, -1)):
        message = json.loads(raw)
        args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
        orders.append(args[0])
    return orders


def _with(path: str, value: Any) -> dict[str, Any]:
    return with_field(GOOD_SPEC, path, value)


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        (_with("parallelism.devices", -1), "parallelism.devices", "greater than or equal to 1"),
        (_with("hyperparameters.batch_size", 0), "hyperparameters", "batch_size must be >= 1"),
        (_with("template", "resnet"), "template", "'mlp', 'cnn' or 'gpt'"),
        (
            _with("parallelism", {"strategy": "model", "devices": 3, "pipeline_stages": 2}),
            "parallelism",
            "pipeline_stages equal to devices",
        ),
        (
            _with("parallelism", {"strategy": "hybrid", "devices": 3, "pipeline_stages": 2}),
            "parallelism",
            "multiple (>= 2) of pipeline_stages",
        ),
        (
            {"name": "s", "entrypoint": {"script": "missing.py"}},
            "entrypoint.script",
            "not found under the allowed roots",
        ),
        ({"name": "s", "entrypoint": {"script": "../etc/passwd"}}, "entrypoint.script", "'..'"),
        (_with("colour", "red"), "colour", "Extra inputs are not permitted"),
        (_with("hyperparameters.lr", "fast"), "hyperparameters", "lr must be a number"),
        (_with("name", ""), "name", "at least 1 character"),
    ],
)
def test_invalid_spec_gets_422_naming_the_field(
    api: TestClient, tokens: dict[str, str], spec: dict[str, Any], field: str, words: str
) -> None:
    response = api.post("/api/jobs", json=spec, headers=bearer(tokens["alice"]))
    assert response.status_code == 422, response.text
    errors = response.json()["detail"]
    named = [e for e in errors if ".".join(map(str, e["loc"][1:])) == field]
    assert named, f"no error on {field}: {errors}"
    assert any(words in e["msg"] for e in named), named
    assert api.get("/api/jobs", headers=bearer(tokens["alice"])).json()["jobs"] == []


def test_valid_but_unsupported_spec_is_refused_as_not_supported_yet(
    api: TestClient, tokens: dict[str, str]
) -> None:
    spec = {
        **_with("precision", "fp16"),
        "parallelism": {"strategy": "model", "devices": 2, "microbatches": 4},
    }
    response = api.post("/api/jobs", json=spec, headers=bearer(tokens["alice"]))
    assert response.status_code == 422
    assert "not supported yet" in response.json()["detail"][0]["msg"]


def test_submit_list_get_and_cancel_a_queued_job(api: TestClient, tokens: dict[str, str]) -> None:
    alice = bearer(tokens["alice"])
    created = api.post("/api/jobs", json=GOOD_SPEC, headers=alice)
    assert created.status_code == 201
    job = created.json()
    assert job["state"] == "queued" and job["owner"] == "alice"
    assert job["phase"] == "waiting"  # the server groups states; the browser keeps no copy
    assert job["implications"]["global_batch"] == 64
    assert job["total_steps"] == 200
    assert [j["id"] for j in api.get("/api/jobs", headers=alice).json()["jobs"]] == [job["id"]]
    cancelled = api.post(f"/api/jobs/{job['id']}/cancel", headers=alice).json()
    assert (cancelled["state"], cancelled["phase"]) == ("cancelled", "finished")
    assert cancelled["updated_at"] > job["updated_at"]  # a newer view of the job wins
    again = api.post(f"/api/jobs/{job['id']}/cancel", headers=alice)
    assert again.status_code == 409
    kinds = [e["kind"] for e in api.get(f"/api/jobs/{job['id']}/events", headers=alice).json()]
    assert kinds == ["submitted", "cancelled"]


def test_another_users_job_is_not_found(api: TestClient, tokens: dict[str, str]) -> None:
    job = api.post("/api/jobs", json=GOOD_SPEC, headers=bearer(tokens["admin"])).json()
    alice = bearer(tokens["alice"])
    for path in ("", "/events", "/metrics", "/metrics/loss", "/logs", "/attempts"):
        assert api.get(f"/api/jobs/{job['id']}{path}", headers=alice).status_code == 404
    assert api.post(f"/api/jobs/{job['id']}/cancel", headers=alice).status_code == 404
    assert api.get("/api/jobs", headers=alice).json()["jobs"] == []


def _scheduled_attempt(
    api: TestClient, tokens: dict[str, str], settings: Settings, database: Database
) -> int:
    node = bearer(tokens["node"])
    registration = NodeRegistration(
        name="n1",
        hostname="h",
        address="127.0.0.1",
        devices=[NodeDevice(index=i, kind="cpu", name=f"CPU slot {i}") for i in range(2)],
    )
    assert (
        api.post("/api/nodes/register", json=registration.model_dump(), headers=node).status_code
        == 200
    )
    api.post("/api/jobs", json=GOOD_SPEC, headers=bearer(tokens["alice"]))

    client = api.app.state.redis  # type: ignore[attr-defined]
    scheduler = node_pool_scheduler(database, client, settings.redis_url)
    placements = scheduler.tick()
    assert [p.slices for p in placements] == [(("n1", (0, 1)),)]
    order = queued_orders(client, "n1")[0]
    assert order["devices"] == [0, 1] and order["node"] == "n1"
    return int(order["attempt_id"])


def test_claim_is_compare_and_set_and_finish_moves_the_job(
    api: TestClient, tokens: dict[str, str], settings: Settings, database: Database
) -> None:
    attempt = _scheduled_attempt(api, tokens, settings, database)
    node = bearer(tokens["node"])
    first = api.post(f"/api/attempts/{attempt}/claim", json={"node": "n1"}, headers=node)
    second = api.post(f"/api/attempts/{attempt}/claim", json={"node": "n1"}, headers=node)
    assert (first.status_code, second.status_code) == (200, 409)
    admin = bearer(tokens["admin"])
    assert api.get("/api/jobs/1", headers=admin).json()["state"] == "running"
    done = api.post(f"/api/attempts/{attempt}/finish", json={"outcome": "succeeded"}, headers=node)
    assert done.json() == {"state": "succeeded"}
    repeat = api.post(f"/api/attempts/{attempt}/finish", json={"outcome": "failed"}, headers=node)
    assert repeat.json() == {"state": "succeeded"}


def test_cancel_before_claim_withdraws_the_attempt(
    api: TestClient, tokens: dict[str, str], settings: Settings, database: Database
) -> None:
    attempt = _scheduled_attempt(api, tokens, settings, database)
    assert (
        api.post("/api/jobs/1/cancel", headers=bearer(tokens["alice"])).json()["state"]
        == "cancelled"
    )
    late = api.post(
        f"/api/attempts/{attempt}/claim", json={"node": "n1"}, headers=bearer(tokens["node"])
    )
    assert late.status_code == 409


def test_cancel_while_running_asks_the_supervisor_to_stop(
    api: TestClient, tokens: dict[str, str], settings: Settings, database: Database
) -> None:
    attempt = _scheduled_attempt(api, tokens, settings, database)
    node = bearer(tokens["node"])
    api.post(f"/api/attempts/{attempt}/claim", json={"node": "n1"}, headers=node)
    assert (
        api.post("/api/jobs/1/cancel", headers=bearer(tokens["alice"])).json()["state"]
        == "cancelling"
    )
    client = api.app.state.redis  # type: ignore[attr-defined]
    assert client.get(keys_of(client).control(attempt)) == b"cancel"
    stopped = api.post(f"/api/attempts/{attempt}/finish", json={"outcome": "stopped"}, headers=node)
    assert stopped.json() == {"state": "cancelled"}


def test_a_restarted_node_registers_again_with_changed_devices(
    api: TestClient, tokens: dict[str, str]
) -> None:
    node = bearer(tokens["node"])

    def register(count: int) -> dict[str, Any]:
        registration = NodeRegistration(
            name="n1",
            hostname="h",
            address="127.0.0.1",
            devices=[NodeDevice(index=i, kind="cpu", name=f"CPU slot {i}") for i in range(count)],
        )
        response = api.post("/api/nodes/register", json=registration.model_dump(), headers=node)
        assert response.status_code == 200, response.text
        return dict(response.json())

    assert len(register(2)["devices"]) == 2
    assert len(register(2)["devices"]) == 2
    assert [d["index"] for d in register(3)["devices"]] == [0, 1, 2]
    assert [d["index"] for d in register(1)["devices"]] == [0]


@pytest.mark.parametrize(
    ("module", "created"),
    [
        ("train", True),
        ("pkg", True),
        ("pkg.step", True),
        ("missing", False),
        ("pkg.missing", False),
        ("escape", False),
        ("outside", False),
    ],
)
def test_module_entrypoints_are_resolved_at_submit_like_scripts(
    api: TestClient, tokens: dict[str, str], settings: Settings, module: str, created: bool
) -> None:
    root = settings.script_root_paths[0]
    (root / "train.py").write_text("print('ok')\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "__main__.py").write_text("print('ok')\n")
    (root / "pkg" / "step.py").write_text("print('ok')\n")
    (root.parent / "outside.py").write_text("print('pwned')\n")
    (root / "escape.py").symlink_to(root.parent / "outside.py")
    spec = {"name": "m", "entrypoint": {"module": module}}
    response = api.post("/api/jobs", json=spec, headers=bearer(tokens["alice"]))
    if created:
        assert response.status_code == 201, response.text
        return
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "entrypoint", "module"]
    assert f"module {module}" in error["msg"] and str(root) not in error["msg"]


def test_every_job_state_has_one_phase() -> None:
    assert set(PHASES) == set(JobState)
    assert {s for s, p in PHASES.items() if p is JobPhase.finished} == FINAL
