"""The job page's log pane says how many of the oldest lines the per-attempt cap dropped."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from backend.telemetry.ingest.writer import write_batch
from tests.e2e.test_run_table import log_in
from tests.telemetry.helpers import LiveServer, add_attempt
from workers.contract.protocol import DEVICES_STREAM, EVENTS_STREAM, LOGS_STREAM, METRICS_STREAM

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_log_pane_names_the_lines_dropped_and_the_cap(page: Page, served: LiveServer) -> None:
    job_id, attempt = add_attempt(served.db, state="running")
    cap = served.settings.log_lines_per_attempt  # 100,000 by default
    items: dict[str, Any] = {METRICS_STREAM: [], DEVICES_STREAM: [], EVENTS_STREAM: []}
    for start in range(0, cap + 250, 10_000):  # written as the ingest writes them
        logs: list[dict[str, Any]] = [
            {"attempt_id": attempt, "rank": 0, "stream": "stdout", "seq": s, "line": f"line {s}"}
            | {"time": 1e9 + s}
            for s in range(start, min(start + 10_000, cap + 250))
        ]
        with served.db.session() as session:
            write_batch(session, {**items, LOGS_STREAM: logs}, log_lines_per_attempt=cap)
    log_in(page, served)
    page.goto(f"{served.url}/jobs/{job_id}")
    expect(page.get_by_test_id("job-logs")).to_contain_text(f"line {cap + 249}")
    expect(page.get_by_test_id("log-dropped")).to_have_text(
        f" · 250 earlier lines dropped (cap {cap:,} per attempt)"
    )
