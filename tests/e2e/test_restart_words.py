"""After a platform stop the job page says what happened in plain words (#33 item 8).

Before, a job whose node lost the API for 14 s read "restarting in 5 s (restart 1 of 2) after:
fenced: no answer from the control plane": the control plane's outage charged to the job, in
its jargon. The stop goes through the server's own rules (advance_job) here, as a node's
report of a fenced attempt does.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import Page, expect

from backend.jobs.attempt_end import AttemptEnd, advance_job
from backend.jobs.attempt_states import AttemptState
from backend.jobs.models import Attempt, Job
from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.test_run_table import log_in
from tests.telemetry.helpers import LiveServer, add_attempt
from workers.supervisor.outcome import NOT_COUNTED

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LOST_API = (
    "Trainboard's API did not answer this node for 14 s, so the node stopped the job's ranks "
    "(the job may have been placed elsewhere meanwhile: stopping keeps it from running twice)"
)


def test_a_job_stopped_by_the_platform_says_so_and_counts_no_restart(
    page: Page, served: LiveServer
) -> None:
    job_id, attempt_id = add_attempt(served.db)
    with served.db.session() as session:
        job = session.get_one(Job, job_id)
        job.name, job.attempt = "through-an-outage", 1
        job.spec = {**job.spec, "max_restarts": 2}
        attempt = session.get_one(Attempt, attempt_id)
        end = AttemptEnd(AttemptState.failed, f"{LOST_API}; {NOT_COUNTED}", platform_fault=True)
        advance_job(session, job, attempt, end)
        # a long back-off keeps it restarting while the page is read
        job.restart_at = job.restart_at + timedelta(minutes=5) if job.restart_at else None
    log_in(page, served)
    page.goto(f"{served.url}/jobs/{job_id}")
    expect(page.get_by_test_id("job-state")).to_have_attribute("data-state", "restarting")
    restart = page.get_by_test_id("job-restart")
    expect(restart).to_contain_text("restarting in")
    expect(restart).to_contain_text("0 of 2 automatic restarts used")
    reason = page.get_by_test_id("job-reason")
    expect(reason).to_contain_text("Trainboard's API did not answer this node for 14 s")
    expect(reason).to_contain_text("not counted against max_restarts")
    events = page.get_by_test_id("job-events")
    expect(events).to_contain_text("not counted: a platform fault, not the job's")
    for shown in (restart, reason, events):
        text = shown.inner_text()
        assert "fenced" not in text and "restart 1 of" not in text, text
    page.get_by_test_id("job-reason").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "job-restart-platform-stop.png"), full_page=False)
