"""What the job page states comes from what runs (#17): the engine's facts after an elastic
resume, the resume dialog's device count, every rank in the log filter, a quiet login page."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Response, expect

from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.helpers import get_job, log_in, running_job_page
from tests.stack import RunningStack, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_after_an_elastic_resume_the_page_shows_the_global_batch_the_engine_keeps(
    page: Page, stack: RunningStack
) -> None:
    # batch 32 on 2 replicas: global batch 64; resumed on 1 device, the engine keeps 64
    # (2 accumulation steps) where the spec's arithmetic on 1 device says 32
    running = running_job_page(page, stack, "browser-facts", devices=2, checkpoint_every=20)
    with running as (job_id, state):
        batch = page.get_by_test_id("job-global-batch")
        strategy = page.get_by_test_id("job-strategy")
        expect(batch).to_have_text("64 = 32 × 1 accumulation × 2 replicas", timeout=60_000)
        expect(strategy).to_have_text("data · 2 devices · dp 2 · stages 1")
        options = page.get_by_test_id("log-rank").locator("option")
        expect(options).to_have_text(["all ranks", "rank 0", "rank 1"])  # printed or not

        page.get_by_test_id("pause-button").click()
        page.get_by_test_id("confirm-button").click()
        expect(state).to_have_attribute("data-state", "paused", timeout=90_000)
        page.get_by_test_id("resume-button").click()
        dialog = page.get_by_test_id("confirm-resume")
        expect(dialog).to_contain_text("It resumes on 2 devices, as before.")
        page.get_by_test_id("resume-devices").fill("")
        expect(dialog).to_contain_text("Enter a whole number of devices")
        expect(page.get_by_test_id("confirm-button")).to_be_disabled()
        page.get_by_test_id("resume-devices").fill("1")
        expect(dialog).to_contain_text("It resumes on 1 device (was 2;")
        page.screenshot(path=str(SCREENSHOTS / "job-resume-dialog.png"), full_page=True)
        page.get_by_test_id("confirm-button").click()

        expect(page.get_by_test_id("job-attempt")).to_contain_text("2", timeout=120_000)
        expect(state).to_have_attribute("data-state", "running", timeout=120_000)
        expect(batch).to_have_text("64 = 32 × 2 accumulation × 1 replica", timeout=60_000)
        expect(strategy).to_have_text("data · 1 device · dp 1 · stages 1")
        job = get_job(stack, job_id)
        assert job["facts"]["global_batch"] == 64 and job["facts"]["accumulation"] == 2
        assert job["implications"]["global_batch"] == 32  # the spec's arithmetic differs
        page.screenshot(path=str(SCREENSHOTS / "job-resumed.png"), full_page=True)


def test_the_login_page_logs_no_console_error(browser: Browser, stack: RunningStack) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: _console(errors, m))
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("response", lambda r: _failed(errors, r))
    try:
        page.goto(f"{stack.url}/jobs/1")  # signed out: the app sends this browser to log in
        expect(page.get_by_test_id("login-token")).to_be_visible()
        assert "/login?next=" in page.url
        page.wait_for_load_state("networkidle")
        assert errors == []
        page.screenshot(path=str(SCREENSHOTS / "login.png"), full_page=True)
        log_in(page, stack)
        wait_for(lambda: page.get_by_test_id("nav-board").is_visible(), timeout=30, what="board")
        assert errors == []
    finally:
        context.close()


def _console(errors: list[str], message: ConsoleMessage) -> None:
    if message.type == "error":
        errors.append(f"console: {message.text}")


def _failed(errors: list[str], response: Response) -> None:
    if response.status >= 400:
        errors.append(f"{response.status} {response.url}")
