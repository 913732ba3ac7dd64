"""Two backend processes: one schedules, the other stands by and takes over when it dies."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from backend.auth.service import bootstrap_admin_token, bootstrap_node_token
from backend.db import Database
from backend.migrate import upgrade
from backend.nodes.deployment import deployment_id
from backend.scheduler.leader import LEADER_KEY
from tests.stack import ADMIN_TOKEN, free_port, private_redis, wait_for
from workers.contract.keys import Keys
from workers.contract.protocol import NodeDevice, NodeRegistration

pytestmark = pytest.mark.slow


def _api(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "backend.app:create_app",
                "--factory",
                "--port",
                str(port),
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: _healthy(url), timeout=60, what=f"the API on port {port}")
    return process


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/api/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def shared_state(tmp_path: Path) -> Iterator[tuple[dict[str, str], str]]:
    """Environment for API processes sharing one database and one Redis; and a node token."""
    db_url = f"sqlite:///{tmp_path / 'shared.db'}"
    upgrade(db_url)
    database = Database(db_url)
    with database.session() as session:
        bootstrap_admin_token(session, configured=ADMIN_TOKEN)
        node_token = bootstrap_node_token(session, node="n1")
    database.dispose()
    with private_redis(tmp_path) as redis_url:
        env = {
            **os.environ,
            "TRAINBOARD_DATABASE_URL": db_url,
            "TRAINBOARD_REDIS_URL": redis_url,
            "TRAINBOARD_DATA_DIR": str(tmp_path / "data"),
            "TRAINBOARD_HEARTBEAT_TIMEOUT": "600",
            "TRAINBOARD_CLAIM_TIMEOUT": "600",
        }
        yield env, node_token


def test_standby_backend_takes_over_scheduling_when_the_leader_dies(
    shared_state: tuple[dict[str, str], str], tmp_path: Path
) -> None:
    env, node_token = shared_state
    client = redis.Redis.from_url(env["TRAINBOARD_REDIS_URL"])
    database = Database(env["TRAINBOARD_DATABASE_URL"])
    with database.session() as session:  # the lock is named by the deployment both share
        leader_key = Keys(deployment_id(session)).name(LEADER_KEY)
    database.dispose()
    leader_port, standby_port = free_port(), free_port()
    leader = _api(env, leader_port, tmp_path / "leader.log")
    standby = None
    try:
        holder = wait_for(lambda: client.get(leader_key), timeout=30, what="a scheduler leader")
        standby = _api(env, standby_port, tmp_path / "standby.log")
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        via_standby = httpx.Client(
            base_url=f"http://127.0.0.1:{standby_port}", headers=admin, timeout=30
        )
        registration = NodeRegistration(
            name="n1",
            hostname="h",
            address="127.0.0.1",
            devices=[NodeDevice(index=i, kind="cpu", name=f"CPU slot {i}") for i in range(4)],
        )
        node = {"Authorization": f"Bearer {node_token}"}
        assert via_standby.post(
            "/api/nodes/register", json=registration.model_dump(), headers=node
        ).is_success
        spec = {
            "name": "first",
            "template": "mlp",
            "parallelism": {"strategy": "data", "devices": 1},
        }

        def state(job_id: int) -> str:
            return str(via_standby.get(f"/api/jobs/{job_id}").json()["state"])

        first = via_standby.post("/api/jobs", json=spec).json()["id"]
        wait_for(lambda: state(first) == "scheduled", timeout=30, what="the leader to schedule")
        assert client.get(leader_key) == holder, "the standby took the lock while the leader lived"

        leader.kill()
        leader.wait()
        second = via_standby.post("/api/jobs", json={**spec, "name": "second"}).json()["id"]
        wait_for(lambda: state(second) == "scheduled", timeout=60, what="the standby to take over")
        assert client.get(leader_key) not in (None, holder)
        via_standby.close()
    finally:
        for process in (leader, standby):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=30)
