"""A node token acts only as its own node, on its own slices, with checkpoints in its job's dir."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from backend.auth.service import ensure_admin, issue_token
from backend.config import Settings
from backend.db import Database
from backend.jobs.attempts import newest_checkpoint, newest_checkpoints
from backend.jobs.checkpoint_trust import refusal
from backend.jobs.models import Attempt
from tests.backend.conftest import bearer, node_pool_scheduler
from tests.backend.test_jobs_api import GOOD_SPEC, queued_orders
from workers.contract.protocol import NodeDevice, NodeRegistration

INSTANCE = "1" * 32
BEAT = {"instance": INSTANCE}


def _registration(name: str, data_dir: Path | None) -> dict[str, object]:
    return NodeRegistration(
        name=name,
        hostname="h",
        address="127.0.0.1",
        devices=[NodeDevice(index=i, kind="cpu", name=f"CPU slot {i}") for i in range(2)],
        data_dir=str(data_dir) if data_dir else None,
        instance=INSTANCE,
    ).model_dump()


def _node_token(database: Database, node: str | None) -> str:
    with database.session() as session:
        _, secret = issue_token(session, user=ensure_admin(session), scopes="node", node=node)
    return secret


@pytest.fixture
def n2_token(database: Database, tokens: dict[str, str]) -> str:
    """A node token bound to n2 (tokens['node'] is bound to n1)."""
    return _node_token(database, "n2")


@pytest.fixture
def attempt_on_n1(
    api: TestClient, tokens: dict[str, str], settings: Settings, database: Database, tmp_path: Path
) -> int:
    """Alice's job, scheduled on n1 (data dir tmp_path/n1) and claimed by n1: its attempt id."""
    node = bearer(tokens["node"])
    answer = api.post(
        "/api/nodes/register", json=_registration("n1", tmp_path / "n1"), headers=node
    )
    assert answer.status_code == 200, answer.text
    assert api.post("/api/jobs", json=GOOD_SPEC, headers=bearer(tokens["alice"])).status_code == 201
    client = api.app.state.redis  # type: ignore[attr-defined]
    node_pool_scheduler(database, client, settings.redis_url).tick()
    attempt = int(queued_orders(client, "n1")[0]["attempt_id"])
    claim = api.post(f"/api/attempts/{attempt}/claim", json={"node": "n1"}, headers=node)
    assert claim.status_code == 200, claim.text
    return attempt


def _job_state(api: TestClient, tokens: dict[str, str]) -> str:
    return str(api.get("/api/jobs/1", headers=bearer(tokens["alice"])).json()["state"])


def test_a_node_token_must_name_its_node_at_mint_time(
    api: TestClient, tokens: dict[str, str]
) -> None:
    admin = bearer(tokens["admin"])
    unbound = api.post("/api/tokens", json={"scopes": ["node"]}, headers=admin)
    assert unbound.status_code == 422 and "bound to one node" in unbound.text
    stray = api.post("/api/tokens", json={"scopes": ["read"], "node": "n1"}, headers=admin)
    assert stray.status_code == 422
    bad_name = api.post("/api/tokens", json={"scopes": ["node"], "node": "../x"}, headers=admin)
    assert bad_name.status_code == 422
    made = api.post("/api/tokens", json={"scopes": ["node"], "node": "gpu-7"}, headers=admin)
    assert made.status_code == 201 and made.json()["node"] == "gpu-7"
    listed = {t["id"]: t["node"] for t in api.get("/api/tokens", headers=admin).json()}
    assert listed[made.json()["id"]] == "gpu-7"


def test_a_node_token_registers_and_heartbeats_only_as_its_own_node(
    api: TestClient, tokens: dict[str, str], n2_token: str
) -> None:
    n1, n2 = bearer(tokens["node"]), bearer(n2_token)
    assert api.post("/api/nodes/register", json=_registration("n1", None), headers=n1).is_success
    fake = api.post("/api/nodes/register", json=_registration("n8", None), headers=n1)
    assert fake.status_code == 403 and "'n1' only" in fake.text
    assert (
        api.post("/api/nodes/register", json=_registration("n1", None), headers=n2).status_code
        == 403
    )
    assert api.post("/api/nodes/n1/heartbeat", json=BEAT, headers=n2).status_code == 403
    assert api.post("/api/nodes/n1/heartbeat", json=BEAT, headers=n1).status_code == 200
    names = [
        n["name"] for n in api.get("/api/nodes", headers=bearer(tokens["alice"])).json()["nodes"]
    ]
    assert names == ["n1"]


def test_a_node_token_minted_before_binding_is_refused(
    api: TestClient, tokens: dict[str, str], database: Database
) -> None:
    legacy = bearer(_node_token(database, None))
    answer = api.post("/api/nodes/register", json=_registration("n1", None), headers=legacy)
    assert answer.status_code == 403 and "bound to no node" in answer.text
    assert api.post("/api/nodes/n1/heartbeat", json=BEAT, headers=legacy).status_code == 403


def test_another_node_cannot_claim_or_finish_an_attempt_that_is_not_on_it(
    api: TestClient, tokens: dict[str, str], n2_token: str, attempt_on_n1: int, database: Database
) -> None:
    n2 = bearer(n2_token)
    assert api.post("/api/nodes/register", json=_registration("n2", None), headers=n2).is_success
    url = f"/api/attempts/{attempt_on_n1}"
    assert api.post(f"{url}/claim", json={"node": "n1"}, headers=n2).status_code == 403
    assert api.post(f"{url}/claim", json={"node": "n2"}, headers=n2).status_code == 404
    planted = {"outcome": "succeeded", "last_checkpoint": "/tmp/planted/step-1"}
    as_n1 = api.post(f"{url}/finish", json={**planted, "node": "n1"}, headers=n2)
    as_itself = api.post(f"{url}/finish", json=planted, headers=n2)
    missing = api.post("/api/attempts/99999/finish", json=planted, headers=n2)
    assert (as_n1.status_code, as_itself.status_code) == (403, 404)
    assert as_itself.json() == {"detail": f"attempt {attempt_on_n1} not found"}
    assert missing.json() == {"detail": "attempt 99999 not found"}  # the same as nonexistent
    assert _job_state(api, tokens) == "running"
    with database.session() as session:
        assert session.get_one(Attempt, attempt_on_n1).last_checkpoint is None
    done = api.post(f"{url}/finish", json={"outcome": "succeeded"}, headers=bearer(tokens["node"]))
    assert done.json() == {"state": "succeeded"}


@pytest.mark.parametrize(
    "reported",
    [
        "/tmp/planted/step-5",
        "{root}/../../job-2/checkpoints/step-5",
        "{root}/./step-5",
        "{root}//step-5",
        "{root}/step-5/..",
        "{root}/step-5/inner",
        "{root}/not-a-step",
        "{root}/attempt-x/step-5",
        "{root}/attempt-1/attempt-2/step-5",
        "step-5",
        "{other}/step-5",
    ],
)
def test_a_checkpoint_outside_the_jobs_own_dir_is_never_resumed_from(
    reported: str,
    api: TestClient,
    tokens: dict[str, str],
    attempt_on_n1: int,
    database: Database,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    root = tmp_path / "n1" / "runs" / "job-1" / "checkpoints"
    other = tmp_path / "n1" / "runs" / "job-2" / "checkpoints"
    path = reported.format(root=root, other=other)
    outcome = {"outcome": "stopped", "last_checkpoint": path}
    with caplog.at_level(logging.WARNING, logger="backend.nodes.trust"):
        answer = api.post(
            f"/api/attempts/{attempt_on_n1}/finish", json=outcome, headers=bearer(tokens["node"])
        )
    assert answer.status_code == 200, answer.text
    assert "ignored" in caplog.text
    with database.session() as session:
        assert newest_checkpoint(session, 1) is None


def test_a_checkpoint_in_the_jobs_own_dir_is_kept(
    api: TestClient, tokens: dict[str, str], attempt_on_n1: int, database: Database, tmp_path: Path
) -> None:
    step = tmp_path / "n1" / "runs" / "job-1" / "checkpoints" / "step-40"
    step.mkdir(parents=True)
    outcome = {"outcome": "stopped", "node": "n1", "last_checkpoint": str(step)}
    node = bearer(tokens["node"])
    assert api.post(f"/api/attempts/{attempt_on_n1}/finish", json=outcome, headers=node).is_success
    with database.session() as session:
        assert newest_checkpoint(session, 1) == str(step)


def test_a_symlinked_checkpoint_that_leaves_the_dir_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "runs" / "job-1" / "checkpoints"
    root.mkdir(parents=True)
    elsewhere = tmp_path / "runs" / "job-2" / "checkpoints" / "step-9"
    elsewhere.mkdir(parents=True)
    (root / "step-9").symlink_to(elsewhere)
    why = refusal(str(root / "step-9"), data_dir=str(tmp_path), job_id=1)
    assert why is not None and "symlink" in why
    (root / "step-10").mkdir()
    assert refusal(str(root / "step-10"), data_dir=str(tmp_path), job_id=1) is None
    # an attempt's own checkpoint dir that is a symlink out leaves the job's dir too
    (root / "attempt-2").symlink_to(elsewhere.parent)
    why = refusal(str(root / "attempt-2" / "step-9"), data_dir=str(tmp_path), job_id=1)
    assert why is not None and "symlink" in why
    (root / "attempt-3" / "step-7").mkdir(parents=True)
    assert refusal(str(root / "attempt-3" / "step-7"), data_dir=str(tmp_path), job_id=1) is None


def test_a_node_that_reported_no_data_dir_has_its_checkpoints_ignored() -> None:
    assert refusal("/x/runs/job-1/checkpoints/step-1", data_dir=None, job_id=1) is not None
    assert refusal("/x/runs/job-1/checkpoints/step-1", data_dir="/x", job_id=1) is None
    assert refusal("/x/runs/job-1/checkpoints/step-1", data_dir="/x", job_id=2) is not None
    assert refusal("/x/runs/job-1/checkpoints/step-1\x00", data_dir="/x", job_id=1) is not None
    assert refusal("/x/runs/job-1/checkpoints/step-1", data_dir="/x/", job_id=1) is None


def test_a_checkpoint_written_by_another_path_is_checked_again_before_a_resume(
    api: TestClient,
    tokens: dict[str, str],
    attempt_on_n1: int,
    database: Database,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # the ingest records a supervisor's `checkpoint` event the same way (telemetry/writer.py)
    with database.session() as session:
        session.get_one(Attempt, attempt_on_n1).last_checkpoint = "/tmp/planted/step-99"
    with database.session() as session, caplog.at_level(logging.WARNING):
        assert newest_checkpoint(session, 1) is None
        assert newest_checkpoints(session, [1]) == {}
    assert "not resuming from attempt" in caplog.text
