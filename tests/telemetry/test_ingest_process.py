"""The ingest in a process of its own (`trainboard ingest`, as `trainboard up` runs it): what
it commits reaches an API that runs no ingest, every point once and in order, and the
process ends cleanly on the SIGTERM that `up` stops it with."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from backend.config import Settings
from tests.telemetry.helpers import LiveServer, add_attempt, receive, stored_steps, subscribe
from workers.contract.protocol import METRICS_STREAM
from workers.telemetry import StreamPublisher

POINTS = 300


def test_trainboard_ingest_stores_what_an_api_without_ingest_delivers_once_in_order(
    settings: Settings, redis_url: str, tmp_path: Path
) -> None:
    with LiveServer.running(settings.model_copy(update={"run_ingest": False})) as api:
        job, attempt = add_attempt(api.db, owner="admin")
        env = {
            **os.environ,
            "TRAINBOARD_DATABASE_URL": settings.db_url,
            "TRAINBOARD_REDIS_URL": redis_url,
            "TRAINBOARD_DATA_DIR": str(tmp_path / "ingest"),
            "TRAINBOARD_AUTO_MIGRATE": "false",
        }
        ingest = subprocess.Popen([sys.executable, "-m", "backend.cli", "ingest"], env=env)
        try:
            ws = api.websocket()
            subscribe(ws, f"job:{job}")
            assert receive(ws)["type"] == "snapshot"
            publisher = StreamPublisher(redis_url, api.keys().stream(METRICS_STREAM), "rank-0")
            for step in range(POINTS):
                publisher.add({"attempt_id": attempt, "rank": 0, "step": step, "name": "loss",
                               "value": 1.0 / (step + 1), "time": time.time()})  # fmt: skip
            publisher.close()
            steps: list[int] = []
            deadline = time.monotonic() + 60
            while len(steps) < POINTS and time.monotonic() < deadline:
                message = receive(ws, timeout=max(0.1, deadline - time.monotonic()))
                steps += [p["step"] for p in message["data"].get("metrics", [])]
            ws.close()
            assert steps == list(range(POINTS))
            assert stored_steps(api.db, attempt) == list(range(POINTS))
        finally:
            ingest.send_signal(signal.SIGTERM)
            try:
                code = ingest.wait(30)
            except subprocess.TimeoutExpired:
                ingest.kill()
                ingest.wait()
                raise
    assert code == 0
