"""The API goes away and comes back: the page shows a banner, reconnects by itself, stays exact."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.helpers import count, log_in, submit_job, wait_state
from tests.stack import EMBEDDED_REDIS, free_port, trainboard_up, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_page_reconnects_after_the_api_restarts(page: Page, tmp_path: Path) -> None:
    port = free_port()
    same_deployment = {"port": port, "cpu_slots": 1}

    with trainboard_up(tmp_path, EMBEDDED_REDIS, **same_deployment) as first:
        finished = submit_job(first, "before-restart", steps=30)
        wait_state(first, finished, "succeeded", timeout=240)
        log_in(page, first)
        page.goto(f"{first.url}/jobs/{finished}")
        expect(page.get_by_test_id("job-state")).to_have_attribute("data-state", "succeeded")
        wait_for(lambda: count(page, "loss-chart") > 0, timeout=60, what="the loss chart")
        drawn = count(page, "loss-chart")
        # a marker that a reload would wipe: the page must recover in place
        page.evaluate("window.__sameDocument = true")

    banner = page.get_by_test_id("conn-banner")
    expect(banner).to_be_visible(timeout=60_000)
    page.screenshot(path=str(SCREENSHOTS / "reconnecting.png"), full_page=True)

    with trainboard_up(tmp_path, EMBEDDED_REDIS, **same_deployment) as second:
        expect(banner).to_be_hidden(timeout=90_000)
        assert page.evaluate("window.__sameDocument") is True
        # the fresh snapshot after the reconnect repeats every point: none is drawn twice
        expect(page.get_by_test_id("job-state")).to_have_attribute("data-state", "succeeded")
        assert count(page, "loss-chart") == drawn

        # and the live topics work again: a job submitted now shows up without a reload
        page.get_by_test_id("nav-board").click()
        expect(page.get_by_test_id(f"job-row-{finished}")).to_be_visible()
        after = submit_job(second, "after-restart", steps=20)
        expect(page.get_by_test_id(f"job-row-{after}")).to_be_visible(timeout=30_000)
        wait_state(second, after, "succeeded", "failed", timeout=240)
        expect(page.get_by_test_id(f"job-row-{after}")).to_have_attribute(
            "data-state", re.compile("succeeded|failed"), timeout=30_000
        )
        assert page.evaluate("window.__sameDocument") is True
