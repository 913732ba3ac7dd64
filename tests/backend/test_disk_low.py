"""A node whose data dir is nearly full is `disk low`: up, shown so, and given no new work."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from backend.config import Settings
from backend.db import Database
from backend.executors.nodes import capacities
from backend.jobs.models import Attempt, Job
from tests.backend.conftest import NODE_INSTANCE, bearer, node_pool_scheduler
from tests.full_disk import fill, small_filesystem
from workers.devices.host import disk_space


@pytest.fixture
def data_disk(tmp_path: Path) -> Iterator[Path]:
    """The node's data dir: a 16 MiB tmpfs (disk low under 5% of it: 819 KiB)."""
    with small_filesystem(tmp_path / "disk", size="16M") as disk:
        yield disk


def beat(api: TestClient, headers: dict[str, str], data_dir: Path) -> None:
    space = disk_space(data_dir)
    assert space is not None
    body = {"instance": NODE_INSTANCE, "disk": space.model_dump()}
    assert api.post("/api/nodes/n1/heartbeat", json=body, headers=headers).is_success


def test_a_full_data_dir_makes_the_node_disk_low_and_new_work_waits_saying_so(
    api: TestClient,
    settings: Settings,
    database: Database,
    tokens: dict[str, str],
    node_headers: dict[str, str],
    data_disk: Path,
) -> None:
    ballast = fill(data_disk)
    beat(api, node_headers, data_disk)

    (node,) = api.get("/api/nodes", headers=bearer(tokens["alice"])).json()["nodes"]
    assert node["state"] == "up"  # not a node state: the node is fine, its disk is not
    assert node["disk"] == {
        "free": 0,
        "total": 16 << 20,
        "low": True,
        "reason": "disk low (0 MiB free)",
    }
    spec = {"name": "waits", "template": "mlp", "parallelism": {"devices": 1}}
    job_id = api.post("/api/jobs", json=spec, headers=bearer(tokens["alice"])).json()["id"]
    client = api.app.state.redis  # type: ignore[attr-defined]
    scheduler = node_pool_scheduler(database, client, settings.redis_url)
    scheduler.tick()

    shown = api.get(f"/api/jobs/{job_id}", headers=bearer(tokens["alice"])).json()
    assert shown["state"] == "queued"
    assert shown["wait_reason"].endswith("; node n1: disk low (0 MiB free)")
    with database.session() as session:
        assert capacities(session) == []

    ballast.unlink()  # space returns: the next heartbeat says so, the job is placed
    beat(api, node_headers, data_disk)
    (node,) = api.get("/api/nodes", headers=bearer(tokens["alice"])).json()["nodes"]
    assert (node["disk"]["low"], node["disk"]["reason"]) == (False, None)
    scheduler.tick()
    with database.session() as session:
        assert session.scalars(select(Attempt.node_name).where(Attempt.job_id == job_id)).all() == [
            "n1"
        ]
        assert session.get_one(Job, job_id).wait_reason is None
