"""Every view passes axe-core (WCAG 2 A/AA and axe's best practices) with no serious or
critical violation (issue #33 item 12): the board, submit, a running and a finished job's
page, compare, sweeps, a sweep, usage, cluster, runs and login, on stored data served
without workers (the `served` fixture). axe-core is the frontend's dev dependency, injected
into each page from frontend/node_modules.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy import insert

from backend.jobs.models import Job
from backend.telemetry.models import DeviceSample, LogLine
from tests.backend.test_sweeps_api import sweep_body
from tests.e2e.test_run_table import log_in, run
from tests.telemetry.helpers import ADMIN, LiveServer, add_attempt, insert_points
from tests.telemetry.test_efficiency import _node

pytestmark = [pytest.mark.browser, pytest.mark.slow]
AXE = Path(__file__).resolve().parents[2] / "frontend" / "node_modules" / "axe-core" / "axe.min.js"


def running_job(served: LiveServer) -> int:
    """A running job on cpus:0 with two ranks' loss, a log and device samples."""
    job_id, attempt = add_attempt(served.db, state="running")
    now = time.time()
    with served.db.session() as session:
        job = session.get_one(Job, job_id)
        job.name, job.attempt = "a11y-running", 1
        session.execute(
            insert(LogLine),
            [
                {"attempt_id": attempt, "rank": 0, "stream": "stdout", "seq": s,
                 "time": now - 60 + s, "line": f"step {s} loss {2 - s / 60:.3f}"}
                for s in range(60)
            ],
        )  # fmt: skip
        session.add_all(
            DeviceSample(node="node-a", device=0, kind="cpu", time=now - 60 + t, util=50.0,
                         mem_used=300 * 2**20, mem_total=8 * 2**30)
            for t in range(0, 60, 5)
        )  # fmt: skip
    insert_points(
        served.db,
        [
            {"attempt_id": attempt, "rank": r, "step": s, "name": n, "time": now - 60 + s,
             "value": 2 - s / 60 if n == "loss" else 0.01}
            for s in range(60)
            for r in (0, 1)
            for n in ("loss", "step_time")
        ],
    )  # fmt: skip
    return job_id


def audit(page: Page, view: str) -> list[str]:
    """axe-core over the page as it is: its serious and critical violations, one line each."""
    page.wait_for_load_state("networkidle")
    page.add_script_tag(path=str(AXE))
    result: dict[str, Any] = page.evaluate(
        "async () => await axe.run(document, {resultTypes: ['violations']})"
    )
    return [
        f"{view}: {v['id']} ({v['impact']}): {v['help']} at "
        + ", ".join(str(n["target"]) for n in v["nodes"][:4])
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A 1280x800 page whose Content-Security-Policy lets the test inject axe-core (the app's
    own policy refuses inline scripts, as it should)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    context.close()


def test_every_view_has_no_serious_accessibility_violation(page: Page, served: LiveServer) -> None:
    _node(served.db, "cpus", [("cpu", "CPU slot", 8 * 2**30), ("cpu", "CPU slot", 8 * 2**30)])
    running = running_job(served)
    finished = [run(served, lr=lr, seed=0, final=lr, tags=["a11y"]) for lr in (0.1, 0.01)]
    created = httpx.post(f"{served.url}/api/sweeps", json=sweep_body(), headers=ADMIN)
    assert created.status_code == 201, created.text
    sweep = created.json()["id"]

    found: list[str] = []
    page.emulate_media(color_scheme="dark")
    page.goto(f"{served.url}/login")
    expect(page.get_by_test_id("login-token")).to_be_visible()
    found += audit(page, "login (dark)")
    page.emulate_media(color_scheme="light")
    page.goto(f"{served.url}/login")
    expect(page.get_by_test_id("login-token")).to_be_visible()
    found += audit(page, "login")
    log_in(page, served)
    views = [
        ("board", "/", f"job-row-{running}"),
        ("submit", "/submit", "memory-estimate"),
        ("job running", f"/jobs/{running}", "loss-chart"),
        ("job finished", f"/jobs/{finished[0]}", "loss-chart"),
        ("compare", f"/compare?jobs={finished[0]},{finished[1]}", "compare-chart-loss"),
        ("sweeps", "/sweeps", "sweeps"),
        ("sweep", f"/sweeps/{sweep}", "sweep-progress"),
        ("usage", "/usage", "usage-csv"),
        ("cluster", "/cluster", "node-cpus"),
        ("runs", "/runs", "runs-table"),
    ]
    # both themes: the app follows the system's (theme "auto"); contrast differs between them
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for view, path, ready in views:
            page.goto(served.url + path)
            expect(page.get_by_test_id(ready).first).to_be_visible()
            page.wait_for_timeout(300)  # live data drawn
            found += audit(page, f"{view} ({scheme})")
    assert not found, "\n".join(found)
