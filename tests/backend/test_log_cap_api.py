"""The logs API says how many of a job's oldest lines the per-attempt cap deleted, and the cap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backend.config import Settings
from backend.db import Database
from backend.telemetry.ingest.writer import write_batch
from tests.app_settings import api_settings
from tests.backend.conftest import bearer
from tests.telemetry.helpers import add_attempt
from workers.contract.protocol import DEVICES_STREAM, EVENTS_STREAM, LOGS_STREAM, METRICS_STREAM

CAP = 100


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str, redis_url: str) -> Settings:
    return api_settings(
        tmp_path, database_url=sqlite_url, redis_url=redis_url, log_lines_per_attempt=CAP
    )


def test_the_log_pane_learns_how_many_lines_were_dropped_and_the_cap(
    api: TestClient, tokens: dict[str, str], database: Database, settings: Settings
) -> None:
    job_id, attempt = add_attempt(database, owner="alice")
    for start in range(0, 3 * CAP + 50, 70):
        logs: list[dict[str, Any]] = [
            {"attempt_id": attempt, "rank": 0, "stream": "stdout", "seq": s, "line": f"l{s}"}
            | {"time": float(s)}
            for s in range(start, min(start + 70, 3 * CAP + 50))
        ]
        items: dict[str, Any] = {METRICS_STREAM: [], DEVICES_STREAM: [], EVENTS_STREAM: []}
        with database.session() as session:
            write_batch(
                session,
                {**items, LOGS_STREAM: logs},
                log_lines_per_attempt=settings.log_lines_per_attempt,
            )
    got = api.get(
        f"/api/jobs/{job_id}/logs", params={"limit": 1000}, headers=bearer(tokens["alice"])
    )
    assert got.status_code == 200, got.text
    body = got.json()
    assert (body["dropped"], body["cap"]) == (3 * CAP + 50 - CAP, CAP)
    assert [line["line"] for line in body["lines"]] == [f"l{s}" for s in range(250, 350)]
