"""GET /api/executor: whether the executor's cluster manager answers, in the server's words
(the banner every page shows under Slurm while its controller does not answer)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import redis
from fastapi.testclient import TestClient

from backend.app import create_app
from backend.db import Database, utcnow
from backend.deployment_keys import Keys
from backend.jobs.cluster import MANAGER_KEY, MANAGER_STALE_SECONDS
from backend.nodes.deployment import deployment_id
from backend.nodes.schemas import ManagerOut
from tests.app_settings import api_settings
from tests.backend.conftest import issue_tokens


def _publish(client: redis.Redis, db: Database, **view: object) -> None:
    with db.session() as session:
        keys = Keys(deployment_id(session))
    body = ManagerOut.model_validate({"manager": "slurm", "nodes": [], **view})
    client.set(keys.name(MANAGER_KEY), body.model_dump_json())


def test_the_node_pool_has_no_manager_to_lose(api: TestClient, tokens: dict[str, str]) -> None:
    headers = {"Authorization": f"Bearer {tokens['alice']}"}
    assert api.get("/api/executor", headers=headers).json() == {
        "executor": "nodes",
        "warning": None,
        "observed_at": None,
    }
    assert api.get("/api/executor").status_code == 401


def test_under_slurm_it_says_when_slurm_does_not_answer_or_is_not_read(
    tmp_path: Path, sqlite_url: str, redis_url: str, migrate: Callable[[str], None]
) -> None:
    settings = api_settings(
        tmp_path, database_url=sqlite_url, redis_url=redis_url, executor="slurm"
    )
    migrate(settings.db_url)
    db = Database(settings.db_url)
    headers = {"Authorization": f"Bearer {issue_tokens(db)['alice']}"}
    client = redis.Redis.from_url(redis_url)
    try:
        with TestClient(create_app(settings)) as api:

            def status() -> dict[str, object]:
                answer = api.get("/api/executor", headers=headers)
                assert answer.status_code == 200, answer.text
                return answer.json()

            # nothing published yet: the scheduler that reads Slurm is not running
            unread = "Slurm's state has not been read (is the scheduler running?)"
            assert status()["warning"] == unread

            now = utcnow()
            _publish(client, db, observed_at=now)
            assert status()["warning"] is None and status()["executor"] == "slurm"

            down = "Slurm unreachable: squeue did not answer within 30 s"
            _publish(client, db, observed_at=now, unreachable=down)
            assert status()["warning"] == down

            old = now - timedelta(seconds=MANAGER_STALE_SECONDS + 30)
            _publish(client, db, observed_at=old)
            warning = str(status()["warning"])
            assert warning.startswith("Slurm's state not read for ") and "scheduler" in warning
    finally:
        client.close()
        db.dispose()
