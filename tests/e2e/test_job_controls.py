"""Submitting with a mistake, pausing and resuming on another gang size, cloning with a new lr."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.helpers import (
    count,
    get_job,
    log_in,
    open_submit,
    running_job_page,
    submit_job,
    submitted_job_id,
    wait_state,
)
from tests.stack import RunningStack, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_field_error_shows_next_to_its_field_and_the_fixed_form_submits(
    page: Page, stack: RunningStack
) -> None:
    log_in(page, stack)
    open_submit(page, name="browser-typo", template="mlp")
    page.get_by_test_id("submit-devices").fill("2")
    page.get_by_test_id("hp-steps").fill("30")
    page.get_by_test_id("hp-lr").fill("100")  # the template allows at most 10
    expect(page.get_by_test_id("implied-dp")).to_have_text("2")
    expect(page.get_by_test_id("implied-fits")).to_contain_text("yes")
    page.get_by_test_id("submit-button").click()

    error = page.get_by_test_id("field-error-hyperparameters.lr")
    expect(error).to_contain_text("lr")
    expect(error).to_contain_text("10")
    expect(page).to_have_url(re.compile(r".*/submit$"))
    page.screenshot(path=str(SCREENSHOTS / "submit-error.png"), full_page=True)

    page.get_by_test_id("hp-lr").fill("0.05")
    page.get_by_test_id("submit-button").click()
    job_id = submitted_job_id(page)
    expect(page.get_by_test_id("job-state")).to_be_visible()
    spec = get_job(stack, job_id)["spec"]
    assert spec["hyperparameters"]["lr"] == 0.05
    assert spec["parallelism"]["devices"] == 2
    wait_state(stack, job_id, "succeeded", "failed", timeout=180)


def test_pause_then_resume_on_a_different_number_of_devices(
    page: Page, stack: RunningStack
) -> None:
    running = running_job_page(page, stack, "browser-pause", devices=2, checkpoint_every=20)
    with running as (job_id, state):
        wait_for(lambda: count(page, "loss-chart") > 3, timeout=90, what="the loss to be drawn")

        page.get_by_test_id("pause-button").click()
        expect(page.get_by_test_id("confirm-pause")).to_contain_text("checkpoint")
        page.get_by_test_id("confirm-button").click()
        expect(state).to_have_attribute("data-state", "paused", timeout=90_000)
        page.screenshot(path=str(SCREENSHOTS / "job-paused.png"), full_page=True)
        drawn = count(page, "loss-chart")

        page.get_by_test_id("resume-button").click()
        expect(page.get_by_test_id("resume-devices")).to_have_value("2")
        page.get_by_test_id("resume-devices").fill("1")
        expect(page.get_by_test_id("confirm-resume")).to_contain_text("was 2")
        page.get_by_test_id("confirm-button").click()
        expect(state).to_have_attribute("data-state", "running", timeout=120_000)
        expect(page.get_by_test_id("job-attempt")).to_contain_text("2")
        expect(page.get_by_test_id("job-devices")).to_have_text(re.compile(r":\d+$"))
        job = get_job(stack, job_id)
        assert job["spec"]["parallelism"]["devices"] == 1
        assert len(job["devices"]) == 1
        # the resumed attempt keeps reporting onto the same chart
        wait_for(
            lambda: count(page, "loss-chart") > drawn + 3,
            timeout=90,
            what="the resumed job's loss to be drawn",
        )


def test_clone_a_job_with_a_changed_learning_rate(page: Page, stack: RunningStack) -> None:
    parent = submit_job(stack, "browser-parent", steps=30, lr=0.01)
    log_in(page, stack)
    page.goto(f"{stack.url}/jobs/{parent}")
    page.get_by_test_id("clone-button").click()
    expect(page).to_have_url(re.compile(rf".*/submit\?clone={parent}$"))
    expect(page.get_by_test_id("clone-source")).to_contain_text(f"#{parent}")
    expect(page.get_by_test_id("submit-name")).to_have_value("browser-parent (clone)")
    expect(page.get_by_test_id("hp-lr")).to_have_value("0.01")
    expect(page.get_by_test_id("hp-steps")).to_have_value("30")
    page.get_by_test_id("hp-lr").fill("0.003")
    page.screenshot(path=str(SCREENSHOTS / "submit-clone.png"), full_page=True)
    page.get_by_test_id("submit-button").click()

    child = submitted_job_id(page)
    assert child != parent
    expect(page.get_by_test_id("job-parent")).to_contain_text(f"#{parent}")
    job = get_job(stack, child)
    assert job["parent_id"] == parent
    assert job["spec"]["hyperparameters"]["lr"] == 0.003
    assert job["spec"]["hyperparameters"]["steps"] == 30
    wait_state(stack, child, "succeeded", "failed", timeout=180)
