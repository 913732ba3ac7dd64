"""A new user in a real browser: log in, submit, watch it train live, cancel another job."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.helpers import open_submit, submitted_job_id
from tests.stack import RunningStack, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _log_in(page: Page, stack: RunningStack) -> None:
    page.goto(stack.url + "/")
    page.get_by_test_id("login-token").fill(stack.token)
    page.get_by_test_id("login-submit").click()
    expect(page.get_by_test_id("nav-submit")).to_be_visible()


def _submit(page: Page, name: str, *, steps: int, devices: int = 2) -> int:
    open_submit(page, name=name, template="mlp")
    page.get_by_test_id("submit-strategy").select_option("data")
    page.get_by_test_id("submit-devices").fill(str(devices))
    page.get_by_test_id("hp-steps").fill(str(steps))
    page.get_by_test_id("hp-batch_size").fill("32")
    page.get_by_test_id("hp-lr").fill("0.01")
    page.get_by_test_id("submit-checkpoint-every").fill("50")
    page.get_by_test_id("submit-button").click()
    return submitted_job_id(page)


def _points(page: Page) -> int:
    return int(page.get_by_test_id("loss-chart").get_attribute("data-points") or 0)


def test_submit_watch_live_and_cancel_in_the_browser(page: Page, stack: RunningStack) -> None:
    _log_in(page, stack)

    job_id = _submit(page, "browser-mlp", steps=600)
    state = page.get_by_test_id("job-state")
    expect(state).to_have_attribute("data-state", "running", timeout=60_000)
    wait_for(lambda: _points(page) > 5, timeout=60, what="the loss chart to draw points")
    early = _points(page)
    wait_for(lambda: _points(page) > early + 20, timeout=60, what="the loss chart to grow live")
    progress = page.get_by_test_id("job-progress")
    wait_for(
        lambda: int(progress.inner_text().split("/")[0].replace(",", "")) > 20,
        timeout=30,
        what="the progress to follow the live steps",
    )
    for index in range(2):
        chart = page.get_by_test_id(f"device-chart-{index}")
        expect(chart).to_be_visible()
        wait_for(
            lambda c=chart: int(c.get_attribute("data-samples") or 0) >= 2,
            timeout=30,
            what=f"device {index} samples",
        )
    page.screenshot(path=str(SCREENSHOTS / "job.png"), full_page=True)
    expect(state).to_have_attribute("data-state", "succeeded", timeout=120_000)
    expect(progress).to_have_text("600/600")
    page.screenshot(path=str(SCREENSHOTS / "job-succeeded.png"), full_page=True)

    page.get_by_test_id("nav-board").click()
    row = page.get_by_test_id(f"job-row-{job_id}")
    expect(row).to_have_attribute("data-state", "succeeded")

    long_id = _submit(page, "browser-long", steps=1_000_000)
    page.get_by_test_id("nav-board").click()
    expect(page.get_by_test_id(f"job-row-{long_id}")).to_have_attribute(
        "data-state", "running", timeout=60_000
    )
    page.screenshot(path=str(SCREENSHOTS / "board.png"), full_page=True)
    page.get_by_test_id(f"job-row-{long_id}").get_by_role("link").first.click()
    expect(page).to_have_url(re.compile(rf".*/jobs/{long_id}$"))
    wait_for(lambda: _points(page) > 3, timeout=60, what="the long job to report")
    attempt = page.get_by_test_id("attempt-1")
    wait_for(lambda: "step-" in attempt.inner_text(), timeout=60, what="a checkpoint")
    first = attempt.inner_text()
    wait_for(
        lambda: "step-" in attempt.inner_text() and attempt.inner_text() != first,
        timeout=60,
        what="the running attempt's newer checkpoint to show without a reload",
    )
    page.get_by_test_id("cancel-button").click()
    page.get_by_test_id("confirm-button").click()
    expect(page.get_by_test_id("job-state")).to_have_attribute(
        "data-state", "cancelled", timeout=20_000
    )
    page.screenshot(path=str(SCREENSHOTS / "job-cancelled.png"), full_page=True)
