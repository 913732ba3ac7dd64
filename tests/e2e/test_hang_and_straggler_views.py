"""Run health in the browser: a device's repeated stragglers on the cluster page, and each
rank's stack at a hang on the job page (collapsed until opened)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from backend.db import Database
from backend.health.stragglers import KIND, Straggler
from backend.jobs.models import JobEvent
from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.test_run_health_views import _log_in
from tests.telemetry.helpers import LiveServer, add_attempt
from tests.telemetry.test_efficiency import _node

pytestmark = [pytest.mark.browser, pytest.mark.slow]

STACK = (
    "Current thread 0x00007f4fc87ce040 (most recent call first):\n"
    '  File "/scripts/hang.py", line 25 in <module>\n'
)


def _events(db: Database, job_id: int, attempt_id: int, kind: str, messages: list[str]) -> None:
    with db.session() as session:
        for message in messages:
            session.add(
                JobEvent(job_id=job_id, attempt_id=attempt_id, kind=kind, message=message, step=30)
            )


def test_cluster_shows_a_devices_repeated_stragglers_and_the_job_page_its_stacks_at_a_hang(
    page: Page, served: LiveServer
) -> None:
    _node(served.db, "gpu-node", [("gpu", "NVIDIA H100 80GB HBM3", 80 * 2**30)] * 2)
    slow = Straggler(0, 1, "gpu-node", 1, median=0.060, others=0.010).message
    jobs = [add_attempt(served.db) for _ in range(2)]
    for job_id, attempt_id in jobs:
        _events(served.db, job_id, attempt_id, KIND, [slow])
    hung_job, hung_attempt = jobs[1]
    _events(served.db, hung_job, hung_attempt, "hung", ["hung: no progress for 5 s"])
    stacks = [f"rank {rank}\n{STACK}" for rank in (0, 1)]
    _events(served.db, hung_job, hung_attempt, "hang_stack", stacks)
    _log_in(page, served)

    page.get_by_test_id("nav-cluster").click()
    badge = page.get_by_test_id("stragglers-gpu-node-1")
    expect(badge).to_have_text("straggler 2× in 24 h")
    ids = ", ".join(f"#{job_id}" for job_id, _ in jobs)
    title = f"a rank on this device was a straggler in jobs {ids} (last 24 h)"
    expect(badge).to_have_attribute("title", title)
    expect(page.get_by_test_id("stragglers-gpu-node-0")).to_have_count(0)
    page.screenshot(path=str(SCREENSHOTS / "cluster-stragglers.png"), full_page=True)

    page.goto(f"{served.url}/jobs/{hung_job}")
    section = page.get_by_test_id("hang-stacks")
    expect(section).to_contain_text("Stacks at hang")
    rank1 = page.get_by_test_id(f"hang-stack-{hung_attempt}-1")
    expect(rank1).to_contain_text("Rank 1 · attempt 1 · step 30")
    expect(rank1.locator("pre")).not_to_be_visible()  # collapsed
    rank1.locator("summary").click()
    expect(rank1.locator("pre")).to_be_visible()
    expect(rank1.locator("pre")).to_contain_text('File "/scripts/hang.py", line 25')
    expect(page.get_by_test_id("job-events")).not_to_contain_text("hang_stack")
    section.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "job-hang-stacks.png"), full_page=True)
