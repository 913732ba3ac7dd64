"""`trainboard backup` copies a running SQLite database; a fresh data dir starts from the copy."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from backend.db import Database
from tests.backend.conftest import bearer
from tests.telemetry.helpers import add_attempt, insert_points, point

SPEC = {"name": "kept", "template": "mlp", "parallelism": {"devices": 1}}

#: each test runs `trainboard backup` in a child process, as an operator does (its imports)
pytestmark = pytest.mark.slow


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


def write_points_until(stop: threading.Event, database: Path, attempt_id: int) -> None:
    """Commit one metric point at a time, as the ingest does, until stopped."""
    conn = sqlite3.connect(database, timeout=30)
    step = 0
    while not stop.is_set():
        step += 1
        with conn:
            conn.execute(
                "INSERT INTO metric_points (attempt_id, rank, step, name, value, time)"
                " VALUES (?, 0, ?, 'loss', ?, ?)",
                (attempt_id, step, 1.0 / step, 1_700_000_000.0 + step),
            )
    conn.close()


def test_a_populated_data_dir_copied_under_writes_restores_users_jobs_and_metrics(
    api: TestClient, settings: Settings, database: Database, tokens: dict[str, str], tmp_path: Path
) -> None:
    admin, alice = bearer(tokens["admin"]), bearer(tokens["alice"])
    assert api.post("/api/users", json={"username": "carol", "password": "x" * 12}, headers=admin)
    api.post("/api/jobs", json=SPEC, headers=alice)
    job_id, attempt_id = add_attempt(database)
    insert_points(database, [point(attempt_id, s, rank=r) for s in range(1, 301) for r in (0, 1)])
    _, busy_attempt = add_attempt(database, owner="carol")
    source = Path(settings.db_url.removeprefix("sqlite:///"))
    stop = threading.Event()
    writer = threading.Thread(target=write_points_until, args=(stop, source, busy_attempt))
    writer.start()
    try:
        time.sleep(0.5)  # the writer is committing while the backup copies
        made = trainboard(
            "backup", str(tmp_path / "copy.db"), env={"TRAINBOARD_DATABASE_URL": settings.db_url}
        )
    finally:
        stop.set()
        writer.join()
    assert made.returncode == 0, made.stderr
    seen = {
        path: api.get(path, headers=admin).json()
        for path in ("/api/users", "/api/jobs", f"/api/jobs/{job_id}/metrics/loss")
    }

    fresh = tmp_path / "fresh-data-dir"
    fresh.mkdir()
    (tmp_path / "copy.db").rename(fresh / "trainboard.db")
    restored = settings.model_copy(update={"data_dir": fresh, "database_url": None})
    with TestClient(create_app(restored)) as client:
        for path, before in seen.items():
            assert client.get(path, headers=admin).json() == before, path
        assert client.get("/api/me", headers=alice).json()["username"] == "alice"
        steps = client.get(f"/api/jobs/{job_id + 1}/metrics/loss", headers=admin).json()["step"]
    assert [u["username"] for u in seen["/api/users"]] == ["admin", "alice", "carol"]
    assert len(seen[f"/api/jobs/{job_id}/metrics/loss"]["step"]) == 300
    assert steps and steps == list(range(1, len(steps) + 1))  # a consistent cut of the writes


def test_the_copy_is_the_owners_alone_and_a_planted_symlink_is_never_followed(
    api: TestClient, settings: Settings, tmp_path: Path
) -> None:
    env = {"TRAINBOARD_DATABASE_URL": settings.db_url}
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)  # like /tmp: anyone may plant a name there
    copy = shared / "trainboard.db"
    made = trainboard("backup", str(copy), env=env)
    assert made.returncode == 0, made.stderr
    assert copy.stat().st_mode & 0o777 == 0o600  # before #30: 0644, webhook secrets in it
    assert [p.name for p in shared.iterdir()] == ["trainboard.db"]  # no scratch left behind

    victim = tmp_path / "victim.txt"
    victim.write_text("not a backup")
    for planted, target in (("live-link.db", victim), ("dangling-link.db", tmp_path / "new")):
        link = shared / planted
        link.symlink_to(target)
        refused = trainboard("backup", str(link), env=env)
        assert (refused.returncode, refused.stderr.strip()) == (
            2,
            f"{link} exists: a backup never overwrites",
        )
    assert victim.read_text() == "not a backup" and not (tmp_path / "new").exists()


def test_pg_dump_gets_the_password_in_its_environment_never_in_argv(
    migrated_postgres_url: str, tmp_path: Path
) -> None:
    # a pg_dump first on PATH that writes down what it was given, then runs the real one
    seen = tmp_path / "seen"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "pg_dump"
    wrapper.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" > {seen}/argv\n'
        f'printf "%s" "$PGPASSWORD" > {seen}/password\nexec /usr/bin/pg_dump "$@"\n'
    )
    wrapper.chmod(0o755)
    seen.mkdir()
    secret = "s3cret-PW-for-backup"
    with_password = migrated_postgres_url.replace("postgres@", f"postgres:{secret}@", 1)
    dest = tmp_path / "db.dump"
    path = f"{bin_dir}:{os.environ['PATH']}"
    made = trainboard(
        "backup", str(dest), env={"TRAINBOARD_DATABASE_URL": with_password, "PATH": path}
    )
    assert made.returncode == 0, made.stderr
    argv = (seen / "argv").read_text()
    assert secret not in argv and "postgresql://postgres@127.0.0.1" in argv  # before: in argv
    assert (seen / "password").read_text() == secret
    assert dest.stat().st_mode & 0o777 == 0o600
    listed = subprocess.run(["pg_restore", "--list", str(dest)], capture_output=True, text=True)
    assert listed.returncode == 0 and "TABLE public jobs" in listed.stdout
