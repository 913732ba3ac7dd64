"""The board as a departures board (queue order, wait reasons) and comparing finished runs."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, Request, expect

from backend.jobs.models import Job
from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.helpers import (
    cancel_quietly,
    log_in,
    open_submit,
    submit_job,
    submitted_job_id,
    wait_state,
)
from tests.stack import RunningStack
from tests.telemetry.helpers import ADMIN_TOKEN, LiveServer, add_attempt
from tests.telemetry.test_series import add_points

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_board_reorders_when_a_high_priority_job_is_submitted(
    page: Page, stack: RunningStack
) -> None:
    # Hold all 4 devices so that everything after it queues (the urgent job too: not
    # preemptible, or a fast machine would run the urgent job before the board showed it)
    blocker = submit_job(stack, "board-blocker", steps=1_000_000, devices=4, preemptible=False)
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

        open_submit(page, name="board-urgent", template="mlp")
        page.get_by_test_id("submit-priority").select_option("high")
        page.get_by_test_id("hp-steps").fill("30")
        page.get_by_test_id("submit-button").click()
        urgent = submitted_job_id(page)

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


def test_the_compare_page_shows_what_the_compare_api_computed_and_never_reads_raw_curves(
    page: Page, served: LiveServer
) -> None:
    a, attempt_a = add_attempt(served.db, state="succeeded")
    b, attempt_b = add_attempt(served.db, state="succeeded")
    with served.db.session() as session:
        job_b = session.get_one(Job, b)
        job_b.spec = {**job_b.spec, "hyperparameters": {"lr": 0.5}}
    add_points(served.db, attempt_a, range(5000))  # 5,000 + 2,500 raw points in all
    add_points(served.db, attempt_b, range(0, 5000, 2))
    add_points(served.db, attempt_b, range(10), name="gpu_mem")
    asked: list[str] = []
    page.on("request", lambda request: asked.append(_path(request)))

    page.goto(served.url + "/")
    page.get_by_test_id("login-token").fill(ADMIN_TOKEN)
    page.get_by_test_id("login-submit").click()
    expect(page.get_by_test_id("nav-board")).to_be_visible()
    page.goto(f"{served.url}/compare?jobs={a},{b}")

    expect(page.get_by_test_id("diff-row-hyperparameters.lr")).to_have_attribute(
        "data-differs", "true"
    )
    expect(page.get_by_test_id(f"diff-cell-hyperparameters.lr-{b}")).to_have_text("0.5")
    expect(page.get_by_test_id("compare-diff").locator("tbody tr")).to_have_count(1)
    expect(page.get_by_test_id("diff-row-template")).to_have_attribute("data-differs", "false")
    # the server's summaries over every step: sin(s / 50) for s < 5000 is lowest at 4948
    expect(page.get_by_test_id(f"summary-loss-{a}")).to_have_text("-0.5235 (-1.000 @ 4948)")
    expect(page.get_by_test_id(f"summary-gpu_mem-{a}")).to_have_text(re.compile("^—"))
    chart = page.get_by_test_id("compare-chart-loss")
    expect(chart).not_to_have_attribute("data-points", "0")
    assert int(chart.get_attribute("data-points") or 0) <= 2 * 1000  # downsampled per job

    page.get_by_test_id("compare-x").select_option("time")
    expect(page.get_by_test_id("compare-chart-loss")).not_to_have_attribute("data-points", "0")
    href = page.get_by_test_id("compare-csv-loss").get_attribute("href")
    assert href == f"/api/series/compare.csv?job={a}&job={b}&metric=loss&x=time"
    csv = page.request.get(served.url + href)  # the page's session cookie
    assert csv.ok and csv.text().splitlines()[0] == (
        f"seconds,#{a} telemetry-test,#{b} telemetry-test"
    )
    assert len(csv.text().splitlines()) == 1 + 5000

    api = [path for path in asked if path.startswith("/api/") and path != "/api/ws"]
    assert not [path for path in api if re.match(r"/api/(jobs/\d+/metrics|series/jobs)", path)]
    assert {path for path in api if "compare" in path} == {
        f"/api/series/compare?job={a}&job={b}&x=step",
        f"/api/series/compare?job={a}&job={b}&x=time",
    }


def _path(request: Request) -> str:
    """The request's path and query, without scheme and host."""
    return re.sub(r"^https?://[^/]+", "", request.url)
