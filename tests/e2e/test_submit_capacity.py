"""The submit form on the real stack (4 CPU slots): a job that would wait forever, env, errors
in view, and the pages at 1280×800 no wider than the window (issue #18)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.helpers import (
    cancel_quietly,
    get_job,
    log_in,
    submit_job,
    submitted_job_id,
    wait_state,
)
from tests.stack import RunningStack

pytestmark = [pytest.mark.browser, pytest.mark.slow]
WINDOW = 1280


def page_width(page: Page) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth"))


def test_a_job_that_would_wait_forever_is_not_submitted_unless_it_may_wait(
    page: Page, stack: RunningStack
) -> None:
    job_id = 0
    try:
        log_in(page, stack)
        assert page_width(page) <= WINDOW
        page.get_by_test_id("nav-cluster").click()
        expect(page.get_by_test_id("node-local")).to_be_visible()
        assert page_width(page) <= WINDOW

        page.get_by_test_id("nav-submit").click()
        page.get_by_test_id("submit-name").fill("too-wide")
        page.get_by_test_id("submit-template").select_option("mlp")
        page.get_by_test_id("submit-devices").fill("5")
        # the server's check (POST /api/jobs/validate), shown as it is typed
        expect(page.get_by_test_id("implied-fits")).to_contain_text(
            "no registered node could ever hold this job"
        )
        page.get_by_test_id("submit-env").fill("LD_PRELOAD=/tmp/x.so")
        page.get_by_test_id("submit-button").click()
        # refused in the page, in the server's words: nothing was submitted
        expect(page.get_by_test_id("field-error-parallelism.devices")).to_contain_text(
            "the largest node, local, has 4"
        )
        expect(page.get_by_test_id("field-error-env")).to_contain_text(
            "variable 'LD_PRELOAD' is reserved"
        )
        expect(page).to_have_url(re.compile(r".*/submit$"))
        assert page_width(page) <= WINDOW

        # a field error at the top is brought into view when Submit (at the bottom) is clicked
        page.get_by_test_id("submit-env").fill("NCCL_DEBUG=INFO")
        page.get_by_test_id("submit-devices").fill("1")
        page.get_by_test_id("submit-name").fill(" ")
        page.get_by_test_id("submit-button").scroll_into_view_if_needed()
        page.get_by_test_id("submit-button").click()
        expect(page.get_by_test_id("field-error-name")).to_be_visible()
        expect(page.get_by_test_id("field-error-name")).to_be_in_viewport()

        page.get_by_test_id("submit-name").fill("too-wide")
        page.get_by_test_id("submit-devices").fill("5")
        page.get_by_test_id("submit-wait-for-capacity").check()
        page.get_by_test_id("submit-button").click()
        job_id = submitted_job_id(page)
        spec = get_job(stack, job_id)["spec"]
        assert spec["wait_for_capacity"] is True and spec["env"] == {"NCCL_DEBUG": "INFO"}
        expect(page.get_by_test_id("job-wait-reason")).to_contain_text("no cluster capacity")
        expect(page.get_by_test_id("job-queue-position")).to_have_text(
            re.compile(r"^\d+ \(1 = placed next\)$")
        )
        assert page_width(page) <= WINDOW
        page.screenshot(path=str(SCREENSHOTS / "job-waits-for-capacity.png"), full_page=True)

        # without the choice the API refuses it, naming the largest node
        with stack.client() as client:
            refused = client.post(
                "/api/jobs",
                json={**spec, "name": "refused", "wait_for_capacity": False},
            )
        assert refused.status_code == 422
        assert "the largest node, local, has 4" in refused.json()["detail"][0]["msg"]
    finally:
        if job_id:
            cancel_quietly(stack, job_id)


def test_every_rank_of_a_template_job_writes_its_log(page: Page, stack: RunningStack) -> None:
    job_id = submit_job(stack, "two-rank-logs", steps=20, devices=2, checkpoint_every=None)
    wait_state(stack, job_id, "succeeded", timeout=240)
    log_in(page, stack)
    page.goto(f"{stack.url}/jobs/{job_id}")
    page.get_by_test_id("log-rank").select_option("1")
    expect(page.get_by_test_id("job-logs")).to_contain_text("rank 1 step 20/20")
    expect(page.get_by_test_id("job-logs")).to_contain_text("rank 1 finished at step 20/20")
    assert page_width(page) <= WINDOW
