"""A data dir serves one `trainboard up`: a second refuses at once; control files are private."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from backend.launcher import DataDirInUse, lock_data_dir
from tests.stack import free_port, trainboard_up, wait_for


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_lock_is_exclusive_and_names_its_holder(tmp_path: Path) -> None:
    held = lock_data_dir(tmp_path)
    try:
        with pytest.raises(DataDirInUse, match=f"pid {os.getpid()}"):
            lock_data_dir(tmp_path)
        assert _mode(tmp_path / "trainboard.lock") == 0o600
    finally:
        os.close(held)
    os.close(lock_data_dir(tmp_path))  # free again once its holder closed it


def _tokens(database_url: str) -> list[tuple[int, object]]:
    engine = sa.create_engine(database_url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT id, revoked_at FROM api_tokens ORDER BY id")).all()
    engine.dispose()
    return [(int(r[0]), r[1]) for r in rows]


@pytest.mark.slow  # starts a whole stack
def test_a_second_up_on_a_data_dir_in_use_refuses_and_revokes_nothing(tmp_path: Path) -> None:
    with trainboard_up(tmp_path, cpu_slots=1) as stack:
        before = _tokens(stack.database_url)
        env = {
            **os.environ,
            "TRAINBOARD_DATA_DIR": str(stack.data_dir),
            "TRAINBOARD_PORT": str(free_port()),
            "TRAINBOARD_REDIS_URL": stack.redis_url,
        }
        env.pop("TRAINBOARD_ADMIN_TOKEN", None)  # would otherwise mint a new printed token
        env.pop("TRAINBOARD_DATABASE_URL", None)
        started = time.monotonic()
        second = subprocess.run(
            [sys.executable, "-m", "backend.cli", "up"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 1, second.stderr
        assert time.monotonic() - started < 15
        assert "in use by another `trainboard up`" in second.stderr
        assert f"pid {stack.process.pid}" in second.stderr
        assert _tokens(stack.database_url) == before
        with stack.client() as client:
            assert client.get("/api/me").status_code == 200  # the printed admin token
            beat = client.get("/api/nodes").json()["nodes"][0]["last_heartbeat"]
            wait_for(  # the embedded worker's node token still works
                lambda: client.get("/api/nodes").json()["nodes"][0]["last_heartbeat"] != beat,
                timeout=15,
                what="a heartbeat after the refused second start",
            )
        data_dir = stack.data_dir
        assert _mode(data_dir) == 0o711 and _mode(data_dir / "runs") & 0o077 == 0o011
        for name in ("trainboard.db", "trainboard.lock"):
            assert _mode(data_dir / name) == 0o600, name
        [(registered,)] = stack.sql("SELECT data_dir FROM nodes")
        assert registered == str(data_dir.resolve())
