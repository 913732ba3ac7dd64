"""The board as a departures board (queue order, wait reasons) and comparing finished runs."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.helpers import cancel_quietly, log_in, submit_job, wait_state
from tests.stack import RunningStack

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_board_reorders_when_a_high_priority_job_is_submitted(
    page: Page, stack: RunningStack
) -> None:
    # Hold all 4 devices so that everything after it queues.
    blocker = submit_job(stack, "board-blocker", steps=1_000_000, devices=4)
    first = second = urgent = 0
    try:
        wait_state(stack, blocker, "running", timeout=240)
        first = submit_job(stack, "board-first", steps=30)
        second = submit_job(stack, "board-second", steps=30)
        log_in(page, stack)
        row = page.get_by_test_id
        expect(row(f"job-row-{first}")).to_have_attribute("data-position", "1")
        expect(row(f"job-row-{second}")).to_have_attribute("data-position", "2")
        expect(row(f"wait-reason-{first}")).not_to_be_empty(timeout=30_000)
        expect(row(f"job-row-{blocker}")).to_have_attribute("data-state", "running")

        page.get_by_test_id("nav-submit").click()
        page.get_by_test_id("submit-name").fill("board-urgent")
        page.get_by_test_id("submit-template").select_option("mlp")
        page.get_by_test_id("submit-priority").select_option("high")
        page.get_by_test_id("hp-steps").fill("30")
        page.get_by_test_id("submit-button").click()
        expect(page).to_have_url(re.compile(r".*/jobs/\d+$"))
        urgent = int(page.url.rstrip("/").rsplit("/", 1)[1])

        page.get_by_test_id("nav-board").click()
        expect(row(f"job-row-{urgent}")).to_have_attribute("data-position", "1")
        expect(row(f"job-row-{first}")).to_have_attribute("data-position", "2")
        expect(row(f"job-row-{second}")).to_have_attribute("data-position", "3")
        queue = page.get_by_test_id("board-queue")
        expect(queue.locator("tbody tr").first).to_have_attribute(
            "data-testid", f"job-row-{urgent}"
        )
        page.screenshot(path=str(SCREENSHOTS / "board-queue.png"), full_page=True)

        page.get_by_test_id("nav-cluster").click()
        expect(page.get_by_test_id("node-local")).to_contain_text(f"#{blocker}")
        # the machine's own load, from the agent's heartbeats (every 2 s), labelled as such
        expect(page.get_by_test_id("host-local")).to_contain_text("Machine CPU")
        expect(page.get_by_test_id("host-local")).to_contain_text("Machine memory")
        page.screenshot(path=str(SCREENSHOTS / "cluster.png"), full_page=True)
    finally:
        cancel_quietly(stack, *[j for j in (urgent, first, second, blocker) if j])


def test_compare_two_finished_jobs_and_read_the_differing_learning_rate(
    page: Page, stack: RunningStack
) -> None:
    slow = submit_job(stack, "compare-lr-small", steps=40, lr=0.001)
    fast = submit_job(stack, "compare-lr-big", steps=40, lr=0.05)
    for job_id in (slow, fast):
        wait_state(stack, job_id, "succeeded", timeout=240)

    log_in(page, stack)
    page.get_by_test_id(f"select-{slow}").check()
    page.get_by_test_id(f"select-{fast}").check()
    page.get_by_test_id("compare-selected").click()
    expect(page).to_have_url(re.compile(rf".*/compare\?jobs={slow},{fast}$"))

    lr = page.get_by_test_id("diff-row-hyperparameters.lr")
    expect(lr).to_have_attribute("data-differs", "true")
    expect(page.get_by_test_id(f"diff-cell-hyperparameters.lr-{slow}")).to_have_text("0.001")
    expect(page.get_by_test_id(f"diff-cell-hyperparameters.lr-{fast}")).to_have_text("0.05")
    # only the learning rate differs; the names are shown but are not a difference
    diff = page.get_by_test_id("compare-diff")
    expect(diff.locator("tbody tr")).to_have_count(1)
    expect(page.get_by_test_id(f"summary-loss-{fast}")).not_to_have_text(re.compile("^—"))
    chart = page.get_by_test_id("compare-chart-loss")
    expect(chart).not_to_have_attribute("data-points", "0")
    page.screenshot(path=str(SCREENSHOTS / "compare.png"), full_page=True)

    # the address is the selection: opening it again shows the same comparison
    page.goto(f"{stack.url}/compare?jobs={slow},{fast}")
    expect(page.get_by_test_id(f"diff-cell-hyperparameters.lr-{fast}")).to_have_text("0.05")
