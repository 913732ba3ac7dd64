"""`trainboard up` keeps its children running: kill -9 one mid-job and training goes on (#17);
the ingest's own process too, every point stored once."""

from __future__ import annotations

from pathlib import Path

import httpx
import psutil
import pytest

from tests.stack import RunningStack, trainboard_up, wait_for

pytestmark = pytest.mark.slow

SPEC = {
    "name": "through-a-crash",
    "template": "mlp",
    "parallelism": {"strategy": "data", "devices": 2},
    "hyperparameters": {"steps": 400, "batch_size": 16},
    "checkpoint": {"every_steps": 50},
}


def child(stack: RunningStack, marker: str) -> psutil.Process | None:
    """The stack's live child process whose command line holds marker."""
    for process in psutil.Process(stack.process.pid).children():
        try:
            if process.status() != psutil.STATUS_ZOMBIE and marker in " ".join(process.cmdline()):
                return process
        except psutil.Error:
            continue
    return None


def answer(stack: RunningStack, path: str) -> dict[str, object] | None:
    try:
        with stack.client() as client:
            response = client.get(path)
        return response.json() if response.status_code == 200 else None
    except httpx.HTTPError:
        return None


@pytest.mark.parametrize("victim", ["backend.api_server", "cli ingest", "worker"])
def test_a_child_killed_mid_job_is_restarted_and_the_job_finishes_every_step_once(
    tmp_path: Path, victim: str
) -> None:
    with trainboard_up(tmp_path, cpu_slots=2) as stack:
        with stack.client() as client:
            job_id = client.post("/api/jobs", json=SPEC).json()["id"]
        wait_for(
            lambda: int((answer(stack, f"/api/jobs/{job_id}") or {}).get("step", 0)) >= 60,  # type: ignore[call-overload]
            timeout=180,
            what="training past a checkpoint",
        )
        dead = child(stack, victim)
        assert dead is not None
        dead.kill()
        wait_for(
            lambda: (alive := child(stack, victim)) is not None and alive.pid != dead.pid,
            timeout=60,
            what=f"{victim} to be restarted",
        )
        assert stack.process.poll() is None  # `up` itself kept running
        job = wait_for(
            lambda: (
                (j := answer(stack, f"/api/jobs/{job_id}")) is not None
                and j["state"] in ("succeeded", "failed", "cancelled")
                and j
            ),
            timeout=300,
            what="the job to end",
        )
        assert job["state"] == "succeeded", job["reason"]
        assert job["restarts"] == 0  # a platform fault spends none of the user's restarts
        # with the ingest killed the job can end before its last points are stored: they
        # wait in Redis for the restarted ingest, which stores them once
        loss = wait_for(
            lambda: (
                (series := answer(stack, f"/api/jobs/{job_id}/metrics/loss")) is not None
                and len(series["step"]) >= 400  # type: ignore[arg-type]
                and series
            ),
            timeout=60,
            what="every point stored",
        )
        assert loss["step"] == list(range(1, 401))
        attempts = answer(stack, f"/api/jobs/{job_id}/attempts")
        if victim != "worker":  # the ranks trained on through the API's or ingest's restart
            assert isinstance(attempts, list) and len(attempts) == 1
        log = stack.log_path.read_text()
        assert "was killed by SIGKILL; restarting in" in log
