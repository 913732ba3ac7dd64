"""The run table, Compare for many runs, and pages that fit a 1280×800 window (issue #18).

On an API serving stored jobs and curves without workers (the `served` fixture): the
summaries loop of the served app summarises the curves, the pages read them.
"""

from __future__ import annotations

import re
import statistics

import pytest
from playwright.sync_api import Page, expect

from backend.jobs.models import Attempt, Job
from backend.jobs.states import JobState, transition
from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.test_board_and_compare import _path
from tests.telemetry.helpers import ADMIN_TOKEN, LiveServer, add_attempt
from tests.telemetry.test_compare import add_curve

pytestmark = [pytest.mark.browser, pytest.mark.slow]
WINDOW = 1280
TRACEBACK = "\n".join(
    ["Traceback (most recent call last):"]
    + [f'  File "/opt/train.py", line {n}, in step\n    loss = model(x)' for n in range(8)]
    + ["RuntimeError: rank 1 lost its peer"]
)


def run(served: LiveServer, *, lr: float, seed: int, final: float, tags: list[str]) -> int:
    """A succeeded job with lr and seed, a loss curve ending at `final`, and grad_norm."""
    job_id, attempt = add_attempt(served.db, state="succeeded")
    with served.db.session() as session:
        job = session.get_one(Job, job_id)
        job.name = f"lr{lr}-seed{seed}"
        job.spec = {**job.spec, "hyperparameters": {"lr": lr, "seed": seed}, "tags": tags}
    add_curve(served.db, attempt, "loss", [4.0, 2.0, final + 0.5, final], t0=0.0)
    add_curve(served.db, attempt, "grad_norm", [1.0, 7.0, 3.0, 2.0], t0=0.0)
    return job_id


def log_in(page: Page, served: LiveServer) -> None:
    page.goto(served.url + "/")
    page.get_by_test_id("login-token").fill(ADMIN_TOKEN)
    page.get_by_test_id("login-submit").click()
    expect(page.get_by_test_id("nav-board")).to_be_visible()


def page_width(page: Page) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth"))


def test_the_run_table_groups_three_seeds_per_learning_rate_and_reads_no_curve(
    page: Page, served: LiveServer
) -> None:
    finals = {(lr, s): lr * 10 + s * 0.01 for lr in (0.1, 0.01, 0.001) for s in range(3)}
    ids = {
        key: run(served, lr=key[0], seed=key[1], final=v, tags=["sweep-a"] if key[0] < 0.1 else [])
        for key, v in finals.items()
    }
    asked: list[str] = []
    page.on("request", lambda request: asked.append(_path(request)))
    log_in(page, served)
    page.get_by_test_id("nav-runs").click()
    expect(page).to_have_url(re.compile(r".*/runs$"))
    expect(page.get_by_test_id("runs-table")).to_have_attribute("data-total", "9")
    # the summaries loop writes the loss summaries within a few seconds
    expect(page.get_by_test_id(f"run-{ids[(0.01, 1)]}-final-loss")).not_to_have_text("—")
    page.get_by_test_id("runs-add-column").fill("hyperparameters.seed")
    page.get_by_test_id("runs-add-column").press("Enter")
    page.get_by_test_id("runs-add-metric").select_option("grad_norm")
    page.get_by_test_id("runs-group").select_option("hyperparameters.lr")

    group = page.get_by_test_id("group-0.01-final-loss")
    seeds = [finals[(0.01, s)] for s in range(3)]
    mean, std = statistics.fmean(seeds), statistics.stdev(seeds)
    expect(group).to_have_text(f"{mean:#.4g} ± {std:#.4g} (n=3)")  # 4 significant digits
    expect(page.get_by_test_id("runs-groups").locator("tbody tr")).to_have_count(3)
    # grad_norm has no best end: its best column is empty, its max is not ranked
    expect(page.get_by_test_id(f"run-{ids[(0.1, 0)]}-best-grad_norm")).to_have_text("—")

    page.get_by_test_id("sort-final:loss").click()
    first = page.get_by_test_id("runs-table").locator("tbody tr").first
    expect(first).to_have_attribute("data-testid", f"run-row-{ids[(0.001, 0)]}")
    expect(page.get_by_test_id(f"run-{ids[(0.001, 0)]}-hyperparameters.seed")).to_have_text("0")
    assert page_width(page) <= WINDOW
    page.screenshot(path=str(SCREENSHOTS / "runs-grouped.png"), full_page=True)

    page.get_by_test_id("runs-tag").fill("sweep-a")
    page.get_by_test_id("runs-tag").press("Enter")
    expect(page.get_by_test_id("runs-table")).to_have_attribute("data-total", "6")
    page.get_by_test_id("runs-search").fill("seed2")
    expect(page.get_by_test_id("runs-table")).to_have_attribute("data-total", "2")
    page.get_by_test_id("runs-search").fill("")
    page.get_by_test_id("runs-state").select_option("failed")
    expect(page.get_by_test_id("runs-table")).to_have_attribute("data-total", "0")
    page.get_by_test_id("runs-state").select_option("succeeded")
    expect(page.get_by_test_id("runs-table")).to_have_attribute("data-total", "6")

    api = [p for p in asked if p.startswith("/api/") and p != "/api/ws"]
    assert [p for p in api if p.startswith("/api/runs")], api
    # the table never pulls a curve (nor the compare API) for its rows
    assert not [p for p in api if re.match(r"/api/(jobs/\d+/metrics|series/)", p)], api

    for key in ((0.001, 0), (0.001, 1), (0.01, 0)):
        page.get_by_test_id(f"run-pick-{ids[key]}").check()
    page.get_by_test_id("runs-compare").click()
    picked = ",".join(str(ids[k]) for k in ((0.001, 0), (0.001, 1), (0.01, 0)))
    expect(page).to_have_url(re.compile(rf".*/compare\?jobs={picked}$"))


def test_compare_keeps_ten_runs_apart_and_inside_the_window(page: Page, served: LiveServer) -> None:
    ids = [
        run(served, lr=round(0.001 * (i + 1), 4), seed=i, final=1.0 / (i + 1), tags=[])
        for i in range(10)
    ]
    log_in(page, served)
    page.goto(f"{served.url}/compare?jobs={','.join(map(str, ids))}")
    expect(page.get_by_test_id(f"summary-loss-{ids[0]}")).not_to_have_text(re.compile("^—"))
    colours = page.locator(".compare-jobs .swatch").evaluate_all(
        "els => els.map(e => getComputedStyle(e).backgroundColor)"
    )
    assert len(colours) == 10 and len(set(colours)) == 10
    expect(page.get_by_test_id("direction-loss")).to_have_text("lower is better")
    expect(page.get_by_test_id("direction-grad_norm")).to_have_text(re.compile("^no best"))
    expect(page.get_by_test_id(f"summary-grad_norm-{ids[0]}")).to_have_text("2.000")
    expect(page.get_by_test_id("parallel-line")).to_have_count(10)
    box = page.get_by_test_id("compare-summary-box")
    overflow = box.evaluate("e => [e.scrollWidth, e.clientWidth, getComputedStyle(e).overflowX]")
    assert overflow[2] == "auto" and overflow[1] <= WINDOW
    assert page_width(page) <= WINDOW
    page.screenshot(path=str(SCREENSHOTS / "compare-ten-runs.png"), full_page=True)


def test_a_job_that_succeeded_on_attempt_two_fits_and_shows_no_old_traceback(
    page: Page, served: LiveServer
) -> None:
    job_id, first = add_attempt(served.db, state="running")
    paused_id, _ = add_attempt(served.db, state="running")
    failed_id, _ = add_attempt(served.db, state="running")
    with served.db.session() as session:
        job = session.get_one(Job, job_id)
        job.name = "restarted-then-succeeded"
        attempt = session.get_one(Attempt, first)
        attempt.state, attempt.exit_reason = "failed", TRACEBACK
        # the real transitions: a restart keeps the traceback as its reason, then success
        transition(job, JobState.restarting, reason=TRACEBACK)
        transition(job, JobState.queued, reason=TRACEBACK)
        second = Attempt(
            job_id=job_id, number=2, node_name="node-a", devices=[0], state="succeeded"
        )
        second.master_port = 1
        session.add(second)
        job.attempt = 2
        for to in (JobState.scheduled, JobState.running, JobState.succeeded):
            transition(job, to)
        transition(session.get_one(Job, paused_id), JobState.paused, reason="paused by user")
        transition(session.get_one(Job, failed_id), JobState.failed, reason=TRACEBACK)
    log_in(page, served)
    expect(page.get_by_test_id(f"job-row-{job_id}")).to_be_visible()
    expect(page.get_by_test_id(f"job-row-{failed_id}")).to_contain_text("RuntimeError")
    assert page_width(page) <= WINDOW  # a 10-line traceback as a reason included
    page.goto(f"{served.url}/jobs/{job_id}")
    expect(page.get_by_test_id("attempt-exit-1")).to_contain_text("RuntimeError: rank 1 lost")
    expect(page.get_by_test_id("job-reason")).to_have_count(0)
    assert page_width(page) <= WINDOW
    page.screenshot(path=str(SCREENSHOTS / "job-attempts-fit.png"), full_page=True)

    page.goto(f"{served.url}/jobs/{paused_id}")
    # the job's own facts (the efficiency facts, a second dl.facts, appear when they load)
    facts = page.locator("dl.facts", has_text="Progress")
    expect(facts).to_contain_text("Paused")
    expect(facts.locator("dt", has_text="Finished")).to_have_count(0)
    assert page_width(page) <= WINDOW
