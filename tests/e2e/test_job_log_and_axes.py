"""The job page as people keep it open (issue #33), on an API serving stored data without
workers (the `served` fixture), live lines pushed onto its live stream as ingest would:

the log pane following its newest line through bursts, pausing when scrolled up, "Jump to
latest"; a search that finds a line long gone from the tail; the whole log downloaded;
log-scale axes with no "null" label on the job page and in Compare; a hybrid job's board
sparkline drawn from its last stage's rank; Escape closing a confirmation; a pasted spec's
refusals all listed under the paste box; Compare with its curves first and an 11th run
refused, not silently unticking the first.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from playwright.sync_api import Locator, Page, expect
from sqlalchemy import insert

from backend.jobs.models import Job
from backend.telemetry.live import feed
from backend.telemetry.models import LogLine
from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.test_run_table import log_in, run
from tests.telemetry.helpers import LiveServer, add_attempt, insert_points

pytestmark = [pytest.mark.browser, pytest.mark.slow]
HYBRID = {"strategy": "hybrid", "devices": 4, "pipeline_stages": 2, "microbatches": 8}
STORED = 2000  # lines stored before the page opens: the tail holds the newest 300 of them


def hybrid_job(served: LiveServer) -> tuple[int, int]:
    """A running 2-stage × 2-replica job: ranks 1 and 3 report the loss (over three decades)."""
    job_id, attempt = add_attempt(served.db, state="running")
    with served.db.session() as session:
        job = session.get_one(Job, job_id)
        job.name, job.attempt = "hybrid-logs", 1
        job.spec = {**job.spec, "name": "hybrid-logs", "parallelism": HYBRID}
        rows = [
            {"attempt_id": attempt, "rank": 0, "stream": "stdout", "seq": s, "time": 1e9 + s,
             "line": f"step {s}/9000 loss {10 * 0.996**s:.4f}"}
            for s in range(STORED)
        ]  # fmt: skip
        session.execute(insert(LogLine), rows)
    points = [
        {"attempt_id": attempt, "rank": rank, "step": s, "name": name, "time": 1e9 + s,
         "value": 10 * 0.92**s if name == "loss" else 0.01 * (rank + 1)}
        for s in range(90)
        for rank, name in [(1, "loss"), (3, "loss"), (0, "step_time"), (1, "step_time")]
    ]  # fmt: skip
    insert_points(served.db, points)
    return job_id, attempt


def push_lines(
    served: LiveServer, redis_url: str, job_id: int, attempt: int, first: int, n: int
) -> None:
    """n live log lines in bursts of 4 deltas at once (several messages in one frame)."""
    client = redis.Redis.from_url(redis_url)
    stream = served.keys().name(feed.LIVE_STREAM)
    for start in range(first, first + n, 8):
        pipe = client.pipeline(transaction=False)
        deltas: list[tuple[str, dict[str, Any]]] = [
            (f"job:{job_id}", {"logs": [
                {"attempt_id": attempt, "rank": 0, "stream": "stdout", "seq": s, "time": 1e9 + s,
                 "line": f"step {s}/9000 live"}
                for s in range(b, min(b + 2, first + n))
            ]})
            for b in range(start, min(start + 8, first + n), 2)
        ]  # fmt: skip
        feed.append(pipe, deltas, stream=stream)
        pipe.execute()
        time.sleep(0.05)
    client.close()


def gap_to_bottom(pane: Locator) -> float:
    return float(pane.evaluate("el => el.scrollHeight - el.clientHeight - el.scrollTop"))


def no_null_labels(chart: Locator) -> list[str]:
    """The y labels uPlot drew (data-y-labels); none reads "null"."""
    expect(chart).to_have_attribute("data-y-labels", re.compile(r"\S"))
    labels = (chart.get_attribute("data-y-labels") or "").split("|")
    assert labels and not [v for v in labels if v in ("null", "NaN", "undefined")], labels
    return [v for v in labels if v]


def test_the_log_follows_searches_and_downloads_and_log_axes_read(
    page: Page, served: LiveServer, redis_url: str, tmp_path: Path
) -> None:
    job_id, attempt = hybrid_job(served)
    log_in(page, served)

    # the board's sparkline draws the rank the server names (the last stage's first: 1)
    spark = page.get_by_test_id(f"sparkline-{job_id}")
    expect(spark).to_have_attribute("data-rank", "1")
    expect(spark).to_have_attribute("data-points", re.compile(r"^([2-9]|\d\d+)$"))

    page.goto(f"{served.url}/jobs/{job_id}")
    pane = page.get_by_test_id("job-logs")
    expect(pane).to_contain_text(f"step {STORED - 1}/9000")
    expect(pane).to_have_attribute("data-following", "true")
    assert gap_to_bottom(pane) <= 4

    # bursts of live lines: it keeps showing the newest (the issue: 546 shown at 567)
    push_lines(served, redis_url, job_id, attempt, STORED, 120)
    expect(pane).to_contain_text(f"step {STORED + 119}/9000 live")
    page.wait_for_timeout(300)
    assert gap_to_bottom(pane) <= 4, "stopped following"
    expect(pane).to_have_attribute("data-following", "true")
    pane.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "job-log-follow.png"), full_page=False)

    # scrolled up: it stays where the reader is while lines arrive; "Jump to latest" returns
    pane.hover()
    page.mouse.wheel(0, -600)
    expect(pane).to_have_attribute("data-following", "false")
    top = pane.evaluate("el => el.scrollTop")
    push_lines(served, redis_url, job_id, attempt, STORED + 120, 40)
    expect(pane).to_contain_text(f"step {STORED + 159}/9000 live")
    assert pane.evaluate("el => el.scrollTop") == top
    page.get_by_test_id("log-jump").click()
    expect(pane).to_have_attribute("data-following", "true")
    assert gap_to_bottom(pane) <= 4
    expect(page.get_by_test_id("log-jump")).to_have_count(0)

    # search reads every stored line: step 7 left the tail 1,700 lines ago
    page.get_by_test_id("log-search").fill("STEP 7/")
    expect(page.get_by_test_id("log-status")).to_have_text("1 matching line in the whole log")
    expect(pane).to_contain_text("step 7/9000 loss")
    page.screenshot(path=str(SCREENSHOTS / "job-log-search.png"), full_page=False)
    page.get_by_test_id("log-search").fill("")

    # the whole stored log as a file
    with page.expect_download() as caught:
        page.get_by_test_id("log-download").click()
    download = caught.value
    assert download.suggested_filename == f"job-{job_id}.log"
    saved = tmp_path / "job.log"
    download.save_as(saved)
    lines = saved.read_text().splitlines()
    assert len(lines) == STORED and lines[0] == "[attempt 1 rank 0] step 0/9000 loss 10.0000"

    # log scale over three decades: powers of ten labelled, the minor ticks blank, no "null"
    page.get_by_test_id("chart-log").check()
    labels = no_null_labels(page.get_by_test_id("loss-chart"))
    assert {"0.01", "0.1", "1", "10"} <= set(labels), labels
    page.get_by_test_id("loss-chart").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "job-log-scale.png"), full_page=False)

    # Escape closes the cancel confirmation without cancelling
    page.get_by_test_id("cancel-button").click()
    expect(page.get_by_test_id("confirm-cancel")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("confirm-cancel")).to_have_count(0)
    expect(page.get_by_test_id("cancel-button")).to_be_visible()
    expect(page.get_by_test_id("job-state")).to_have_text("running")
    # ... and an open edit without saving it
    page.get_by_test_id("rename-button").click()
    page.get_by_test_id("name-input").fill("not saved")
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("name-input")).to_have_count(0)
    expect(page.locator("h1")).to_contain_text("hybrid-logs")

    # Compare on a log scale: no "null" either
    other, _ = hybrid_job(served)
    page.goto(f"{served.url}/compare?jobs={job_id},{other}")
    page.get_by_test_id("compare-log").check()
    no_null_labels(page.get_by_test_id("compare-chart-loss"))


def test_a_pasted_spec_lists_every_refusal_under_the_paste_box(
    page: Page, served: LiveServer
) -> None:
    log_in(page, served)
    page.goto(f"{served.url}/submit")
    page.locator("details.paste summary").click()
    page.get_by_test_id("submit-paste").fill(
        "name: pasted\ntemplate: mlp\nparallelism:\n  devices: two\n"
        "checkpoint:\n  keep_last: 0\nhyperparamters: {lr: 0.1}\n"
    )
    page.get_by_test_id("paste-submit").click()
    problems = page.get_by_test_id("paste-errors")
    expect(problems).to_contain_text("parallelism.devices: must be a whole number")
    expect(problems).to_contain_text("checkpoint.keep_last: must be at least 1")
    expect(problems).to_contain_text("hyperparamters: is not a setting of a job spec")
    expect(problems.locator("li")).to_have_count(3)
    assert "Input should be" not in problems.inner_text()
    problems.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "submit-paste-errors.png"), full_page=False)


def test_compare_shows_curves_first_and_refuses_an_eleventh_run(
    page: Page, served: LiveServer
) -> None:
    ids = [
        run(served, lr=round(0.1 * (i + 1), 2), seed=i, final=1.0 / (i + 1), tags=[])
        for i in range(11)
    ]
    log_in(page, served)
    page.goto(f"{served.url}/runs")
    for job_id in ids[:10]:
        page.get_by_test_id(f"run-pick-{job_id}").check()
    eleventh = page.get_by_test_id(f"run-pick-{ids[10]}")
    eleventh.click()
    expect(page.get_by_test_id("pick-limit")).to_have_text(
        f"Compare takes at most 10 runs: untick one to add #{ids[10]}."
    )
    expect(eleventh).not_to_be_checked()
    expect(page.get_by_test_id(f"run-pick-{ids[0]}")).to_be_checked()  # the first stays
    expect(page.get_by_test_id("runs-compare")).to_have_text("Compare 10 selected")

    page.goto(f"{served.url}/compare?jobs={ids[0]},{ids[1]},{ids[2]}")
    chart = page.get_by_test_id("compare-chart-loss")
    expect(chart).not_to_have_attribute("data-points", "0")
    box = chart.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 800, box  # whole, in the first screen
    csv = page.get_by_test_id("compare-csv").bounding_box()  # one compact menu
    assert csv is not None and csv["height"] < 36 and csv["width"] < 160, csv
    page.screenshot(path=str(SCREENSHOTS / "compare-curves-first.png"), full_page=False)
