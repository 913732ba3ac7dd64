"""Start-up is never silent (#33 item 6): an open job page shows each start-up phase live.

The page is opened while the job still waits in the queue; when it starts, the supervisor's
`startup:*` events reach the page over the websocket (no reload), first as a row of phases
(done, now, later), then, after the first step, as one line with each phase's time.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.helpers import cancel_quietly, log_in, submit_job, wait_state
from tests.stack import RunningStack

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_an_open_job_page_shows_the_start_up_phases_as_they_happen(
    page: Page, stack: RunningStack
) -> None:
    blocker = submit_job(stack, "startup-blocker", steps=1_000_000, devices=4)
    wait_state(stack, blocker, "running", timeout=180)
    job = submit_job(stack, "startup-watched", steps=300, devices=2)
    try:
        log_in(page, stack)
        page.goto(f"{stack.url}/jobs/{job}")
        expect(page.get_by_test_id("job-state")).to_have_attribute("data-state", "queued")
        page.evaluate("window.__sameDocument = true")
        expect(page.get_by_test_id("startup-phases")).to_have_count(0)  # nothing started yet
        cancel_quietly(stack, blocker)

        # the phases arrive one by one while the page stays open
        phases = page.get_by_test_id("startup-phases")
        expect(page.get_by_test_id("startup-ranks")).to_have_attribute(
            "data-state", "done", timeout=120_000
        )
        page.screenshot(path=str(SCREENSHOTS / "job-startup-phases.png"), full_page=False)
        expect(phases).to_have_attribute("data-done", "true", timeout=120_000)
        text = phases.inner_text()
        assert re.match(r"Started in \d+\.\d s \(ranks starting · ", text), text
        for label in ("interpreter and torch imported ", "rendezvous ", "model and data ready "):
            assert re.search(re.escape(label) + r"\d+\.\d s", text), text
        assert "first step" in text
        assert page.evaluate("window.__sameDocument") is True
        # and the timeline holds them, with their times
        events = page.get_by_test_id("job-events")
        for kind in ("startup:ranks", "startup:imported", "startup:rendezvous", "startup:data"):
            expect(events).to_contain_text(kind)
        expect(events).to_contain_text("startup:first_step")
    finally:
        cancel_quietly(stack, blocker, job)
