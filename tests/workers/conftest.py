"""Fixtures for worker tests: node settings and a private Redis that can go away."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from worker_helpers import PrivateRedis

from workers.node.settings import WorkerSettings


@pytest.fixture
def worker_settings(tmp_path: Path, redis_url: str) -> WorkerSettings:
    """Settings of a node agent writing under tmp_path, on the test Redis."""
    return WorkerSettings(
        redis_url=redis_url,
        node_name="test-node",
        data_dir=tmp_path / "data",
        stop_grace_seconds=20.0,
    )


@pytest.fixture
def private_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRedis]:
    """A running private Redis the test may stop and start again."""
    server = PrivateRedis(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()
