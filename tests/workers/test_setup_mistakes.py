"""Set-up mistakes surface at once, in words that say the fix (#33 item 13).

- A script in a directory the job user cannot enter (or a script it cannot read) is refused
  at submit, naming that directory and the chmod that fixes it; before, it was accepted and
  failed in the rank with Python's "can't open file ... Permission denied", which the
  supervisor test here shows is what the rank really meets.
- With no node registered at all (every worker refused to start), a queued job's wait
  reason says so and how to start one, instead of "no cluster capacity".
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient
from worker_helpers import attempt_order

from backend.app import create_app
from backend.auth.service import bootstrap_admin_token, ensure_admin
from backend.config import Settings
from backend.db import Database
from backend.executors.nodes import NO_NODE, NodePool
from backend.jobs import fencing, script_access
from backend.scheduler.loop import Scheduler
from tests.app_settings import ADMIN_TOKEN, api_settings
from tests.job_users import reachable
from workers.contract import entrypoints
from workers.contract.protocol import NodeDevice, NodeRegistration
from workers.contract.spec import JobSpec
from workers.node.celery_app import make_celery
from workers.supervisor.attempt import Supervisor
from workers.supervisor.settings import SupervisorSettings

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
as_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="ranks run as another user only under a root worker"
)


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str, redis_url: str) -> Settings:
    """An API with a script root the job user can reach (as an operator sets one up)."""
    reachable(tmp_path)
    return api_settings(tmp_path, database_url=sqlite_url, redis_url=redis_url, scripts=True)


@pytest.fixture
def api(settings: Settings, migrate: Callable[[str], None]) -> Iterator[TestClient]:
    migrate(settings.db_url)
    database = Database(settings.db_url)
    with database.session() as session:
        bootstrap_admin_token(session, configured=ADMIN_TOKEN)
        ensure_admin(session)
    database.dispose()
    with TestClient(create_app(settings)) as client:
        yield client


def private_script(root: Path) -> Path:
    """team/private/train.py under root, its directory closed to other users (0700)."""
    private = root / "team" / "private"
    private.mkdir(parents=True)
    os.chmod(root / "team", 0o755)
    script = private / "train.py"
    script.write_text("print('trained')\n")
    os.chmod(script, 0o644)
    os.chmod(private, 0o700)
    return script


def submit(api: TestClient, script: str) -> tuple[int, str]:
    answer = api.post(
        "/api/jobs", json={"name": "s", "entrypoint": {"script": script}}, headers=ADMIN
    )
    detail = answer.json().get("detail")
    return answer.status_code, detail[0]["msg"] if isinstance(detail, list) else ""


@as_root
def test_a_script_the_job_user_cannot_reach_is_refused_at_submit_naming_the_fix(
    api: TestClient, settings: Settings
) -> None:
    root = settings.script_root_paths[0]
    script = private_script(root)

    status, message = submit(api, "team/private/train.py")
    assert status == 422
    assert "directory 'team/private/' under the script root is not traversable" in message
    assert "(mode 0700)" in message and "Fix: chmod o+x 'team/private'" in message
    assert str(root) not in message  # the host's paths stay unnamed, as for a missing script
    # the form's check says the same before anything is submitted
    checked = api.post(
        "/api/jobs/validate",
        json={"name": "s", "entrypoint": {"script": "team/private/train.py"}},
        headers=ADMIN,
    ).json()
    assert checked["valid"] is False and "chmod o+x" in checked["problems"][0]["msg"]

    os.chmod(script.parent, 0o711)  # the directory opened, the script itself still private
    os.chmod(script, 0o600)
    status, message = submit(api, "team/private/train.py")
    assert status == 422
    assert "'team/private/train.py' under the script root is not readable" in message
    assert "Fix: chmod o+r 'team/private/train.py'" in message

    os.chmod(script, 0o644)
    assert submit(api, "team/private/train.py")[0] == 201


@as_root
def test_a_module_needs_its_package_directories_listable(
    api: TestClient, settings: Settings
) -> None:
    root = settings.script_root_paths[0]
    package = root / "pkg"
    package.mkdir()
    (package / "__main__.py").write_text("print('trained')\n")
    os.chmod(package, 0o711)  # enterable, not listable: the import system lists it
    answer = api.post(
        "/api/jobs", json={"name": "m", "entrypoint": {"module": "pkg"}}, headers=ADMIN
    )
    assert answer.status_code == 422
    assert "Fix: chmod o+rx 'pkg'" in answer.json()["detail"][0]["msg"]
    os.chmod(package, 0o755)
    created = api.post(
        "/api/jobs", json={"name": "m", "entrypoint": {"module": "pkg"}}, headers=ADMIN
    )
    assert created.status_code == 201, created.text


@as_root
def test_the_rank_really_fails_where_the_submit_check_refuses(
    supervisor_settings: SupervisorSettings, tmp_path: Path
) -> None:
    root = reachable(tmp_path / "scripts")
    os.chmod(root, 0o755)
    private_script(root)
    spec = JobSpec.model_validate({"name": "s", "entrypoint": {"script": "team/private/train.py"}})
    assert spec.entrypoint is not None
    launch = entrypoints.resolve(spec.entrypoint, [root])
    assert script_access.job_user_problem(spec.entrypoint, launch) is not None

    settings = dataclasses.replace(supervisor_settings, script_roots=[root])
    outcome = Supervisor(attempt_order(spec), settings).run()

    assert outcome.outcome == "failed"
    assert outcome.reason is not None and "can't open file" in outcome.reason
    assert "Permission denied" in outcome.reason


def test_with_no_node_registered_a_queued_job_says_so_and_how_to_start_one(
    api: TestClient, settings: Settings, redis_url: str
) -> None:
    created = api.post("/api/jobs", json={"name": "waits", "template": "mlp"}, headers=ADMIN).json()
    database = Database(settings.db_url)
    client = redis.Redis.from_url(redis_url)
    pool = NodePool(client=client, celery=make_celery(redis_url), heartbeat_timeout=60)
    scheduler = Scheduler(db=database, client=client, interval=0.1, executor=pool)
    try:
        assert scheduler.tick() == []
        job = api.get(f"/api/jobs/{created['id']}", headers=ADMIN).json()
        assert job["state"] == "queued"
        assert job["wait_reason"] == NO_NODE
        assert job["wait_reason"].startswith("no worker node is registered: start one with")

        # a node registers: the job is placed on it
        registration = NodeRegistration(
            name="n1",
            hostname="h",
            address="127.0.0.1",
            devices=[NodeDevice(index=0, kind="cpu", name="CPU slot 0")],
        )
        with database.session() as session:
            fencing.register(session, client, registration=registration)
        assert [p.job_id for p in scheduler.tick()] == [created["id"]]
    finally:
        database.dispose()
        client.close()
