"""Fixtures for worker tests: node settings and a private Redis that can go away."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.job_users import reachable
from workers.node.settings import WorkerSettings
from workers.supervisor.job_user import Isolation, prepare_isolation
from workers.supervisor.settings import SupervisorSettings


@pytest.fixture
def worker_settings(tmp_path: Path, redis_url: str) -> WorkerSettings:
    """Settings of a node agent writing under tmp_path, on the test Redis."""
    return WorkerSettings(
        redis_url=redis_url,
        node_name="test-node",
        data_dir=reachable(tmp_path / "data"),
        stop_grace_seconds=20.0,
    )


@pytest.fixture(scope="session")
def isolation(tmp_path_factory: pytest.TempPathFactory) -> Isolation:
    """Ranks as the unprivileged job user when the tests run as root, as a worker would."""
    settings = WorkerSettings()
    runs = reachable(tmp_path_factory.mktemp("isolation-probe")) / "runs"
    return prepare_isolation(
        account=settings.job_user,
        uid_base=settings.job_uid_base,
        allow_same_user=True,
        runs_dir=runs,
    )


@pytest.fixture
def supervisor_settings(
    worker_settings: WorkerSettings, isolation: Isolation
) -> SupervisorSettings:
    """What the node agent hands each attempt's supervisor."""
    return worker_settings.for_supervisor(isolation)
