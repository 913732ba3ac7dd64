"""Any number of nodes claiming their own slices of one attempt at the same instant all win.

Each node claims from its own session, released together by a barrier, on SQLite and on
PostgreSQL (row locks, READ COMMITTED): a check-then-act claim refused one of two such
claims in 4 of 32 two-node starts (#23).
"""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text

from backend.config import Settings
from backend.db import Database
from backend.jobs.attempts import claim
from backend.jobs.fencing import register
from backend.jobs.models import Attempt, AttemptSlice, Job
from tests.app_settings import api_settings
from tests.backend.conftest import bearer, node_pool_scheduler
from workers.contract.protocol import NodeDevice, NodeRegistration

#: nodes of one gang
NODES = 6
ROUNDS = 4


@pytest.fixture(params=["sqlite", "postgresql"])
def settings(
    request: pytest.FixtureRequest, tmp_path: Path, sqlite_url: str, redis_url: str
) -> Settings:
    postgres = request.param == "postgresql"
    url = request.getfixturevalue("migrated_postgres_url") if postgres else sqlite_url
    return api_settings(tmp_path, database_url=url, redis_url=redis_url)


def race(database: Database, attempt_id: int, instances: dict[str, str]) -> list[bool]:
    """Each node claims its own slice from its own session, all released at one barrier."""
    barrier = threading.Barrier(len(instances))

    def claimant(name: str) -> bool:
        with database.session() as session:
            session.execute(text("SELECT 1"))  # connected before the start
            barrier.wait(timeout=30)
            return claim(session, attempt_id=attempt_id, node=name, instance=instances[name])

    with ThreadPoolExecutor(len(instances)) as pool:
        return list(pool.map(claimant, instances))


def test_every_node_of_a_gang_claiming_at_once_wins(
    api: TestClient, tokens: dict[str, str], settings: Settings, database: Database
) -> None:
    client = api.app.state.redis  # type: ignore[attr-defined]
    instances = {f"n{i}": uuid.uuid4().hex for i in range(NODES)}
    with database.session() as session:
        for name, instance in instances.items():
            node = NodeRegistration(
                name=name,
                instance=instance,
                hostname=name,
                address="127.0.0.1",
                devices=[NodeDevice(index=i, kind="cpu", name=f"slot {i}") for i in range(ROUNDS)],
                data_dir="/",
                # one shared run root: each sees n0's marker (a multi-node job needs that)
                storage_seen={} if name == "n0" else {"n0": instances["n0"]},
            )
            register(session, client, registration=node)
    scheduler = node_pool_scheduler(database, client, settings.redis_url)
    spec = {"name": "gang", "template": "mlp", "parallelism": {"devices": NODES, "nodes": NODES}}
    for _ in range(ROUNDS):
        job_id = api.post("/api/jobs", json=spec, headers=bearer(tokens["alice"])).json()["id"]
        scheduler.tick()
        with database.session() as session:
            attempt_id = session.scalars(select(Attempt.id).where(Attempt.job_id == job_id)).one()
        won = race(database, attempt_id, instances)
        assert won == [True] * NODES
        with database.session() as session:
            states = session.scalars(
                select(AttemptSlice.state).where(AttemptSlice.attempt_id == attempt_id)
            ).all()
            assert list(states) == ["running"] * NODES
            assert session.get_one(Job, job_id).state == "running"
            assert session.get_one(Attempt, attempt_id).state == "running"
