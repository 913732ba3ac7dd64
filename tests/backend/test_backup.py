"""`trainboard backup` copies a running SQLite database; a fresh data dir starts from the copy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fastapi.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from tests.backend.conftest import bearer

SPEC = {"name": "kept", "template": "mlp", "parallelism": {"devices": 1}}


def trainboard(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "backend.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_backup_taken_while_running_restores_into_a_fresh_data_dir(
    api: TestClient, settings: Settings, tokens: dict[str, str], tmp_path: Path
) -> None:
    alice = bearer(tokens["alice"])
    job_id = api.post("/api/jobs", json=SPEC, headers=alice).json()["id"]
    copy = tmp_path / "backup.db"

    made = trainboard("backup", str(copy), env={"TRAINBOARD_DATABASE_URL": settings.db_url})
    api.post("/api/jobs", json=SPEC, headers=alice)  # after the backup: not in it

    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith(f"backed up {settings.db_url.removeprefix('sqlite:///')} to ")
    assert made.stdout.rstrip().endswith("integrity ok)")
    again = trainboard("backup", str(copy), env={"TRAINBOARD_DATABASE_URL": settings.db_url})
    assert (again.returncode, again.stderr.strip()) == (
        2,
        f"{copy} exists: a backup never overwrites",
    )

    fresh = tmp_path / "restored"
    fresh.mkdir()
    copy.rename(fresh / "trainboard.db")
    restored = settings.model_copy(update={"data_dir": fresh, "database_url": None})
    with TestClient(create_app(restored)) as client:
        jobs = client.get("/api/jobs", headers=alice).json()["jobs"]
    assert [(j["id"], j["name"]) for j in jobs] == [(job_id, "kept")]
