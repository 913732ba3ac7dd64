"""A hostile script job, as an ordinary user, tries every way out; every one fails.

Its own training and metrics still work. Runs where the job user is in force (as root,
which CI is); elsewhere ranks run as the worker's own user and there is nothing to test.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.job_users import reachable
from tests.stack import EMBEDDED_REDIS, RunningStack, trainboard_up, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="ranks switch to the job user only as root"),
]
PROBES = {
    "environment",
    "parent-environ",
    "other-environ",
    "database-file",
    "redis-socket",
    "other-job-write",
    "other-job-list",
    "node-route",
}
HOSTILE = Path(__file__).parent / "hostile" / "probe_job.py"


def ordinary_user(stack: RunningStack) -> httpx.Client:
    """A client holding a read/submit token of a new ordinary user."""
    with stack.client() as admin:
        admin.post(
            "/api/users", json={"username": "mallory", "password": "correct-horse-9"}
        ).raise_for_status()
    with httpx.Client(base_url=stack.url, timeout=30) as session:
        session.post(
            "/api/login", json={"username": "mallory", "password": "correct-horse-9"}
        ).raise_for_status()
        minted = session.post("/api/tokens", json={"scopes": ["read", "submit"], "name": "m"})
        minted.raise_for_status()
        token = minted.json()["token"]
    return httpx.Client(
        base_url=stack.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def finished(client: httpx.Client, job_id: int) -> dict[str, Any] | None:
    job = client.get(f"/api/jobs/{job_id}").json()
    return job if job["state"] in ("succeeded", "failed", "cancelled") else None


def worker_redis_socket() -> str:
    """The embedded Redis's socket, as the worker was told (read as root)."""
    for process in psutil.process_iter(["cmdline"]):
        if "worker" in (process.info["cmdline"] or []):
            url = process.environ().get("TRAINBOARD_REDIS_URL", "")
            if url.startswith("unix://"):
                return url.removeprefix("unix://")
    raise AssertionError("no worker with a unix-socket Redis found")


def test_a_hostile_script_reaches_nothing_of_the_control_plane_and_still_trains(
    tmp_path: Path,
) -> None:
    scripts = reachable(tmp_path / "scripts")
    shutil.copy(HOSTILE, scripts / "probe_job.py")
    env = {"TRAINBOARD_SCRIPT_ROOTS": str(scripts)}
    with trainboard_up(tmp_path, EMBEDDED_REDIS, cpu_slots=2, extra_env=env) as stack:
        with stack.client() as admin:
            other = admin.post(
                "/api/jobs",
                json={"name": "victim", "template": "mlp", "hyperparameters": {"steps": 5}},
            ).json()["id"]
            assert wait_for(lambda: finished(admin, other), timeout=120, what="the victim job")
        other_dir = stack.data_dir / "runs" / f"job-{other}"
        redis_socket = worker_redis_socket()
        with ordinary_user(stack) as mallory:
            spec = {
                "name": "hostile",
                "entrypoint": {
                    "script": "probe_job.py",
                    "args": [str(stack.data_dir), str(other_dir), stack.url, redis_socket],
                },
            }
            created = mallory.post("/api/jobs", json=spec)
            assert created.status_code == 201, created.text
            job_id = created.json()["id"]
            job = wait_for(lambda: finished(mallory, job_id), timeout=120, what="the hostile job")
            lines = [x["line"] for x in mallory.get(f"/api/jobs/{job_id}/logs").json()["lines"]]
            assert job["state"] == "succeeded", (job, lines)
            probes = {line.split()[1]: line for line in lines if line.startswith("PROBE ")}
            assert set(probes) == PROBES, lines
            leaks = [line for line in probes.values() if " blocked " not in line]
            assert leaks == []
            assert "own work done" in lines
            uid_line = next(line for line in lines if line.startswith("uid "))
            assert uid_line.split()[1] not in ("0", str(os.getuid()))
            loss = mallory.get(f"/api/jobs/{job_id}/metrics/loss").json()
            assert loss["step"] == list(range(1, 21))
        assert not (other_dir / "planted").exists()
