"""Compare as a W&B user reads it (issue #33 item 11), on stored runs without workers (the
`served` fixture): one lr=0.3 spike no longer flattens the other curves once outliers are
clipped; a typed y range; smoothing keeps the raw curves; relative time or the wall clock on
x (each run's first point from the server); values in the
legend, the summary and the parallel axes in one number format; one compact "Download CSV"
menu instead of a link per chart.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from backend.jobs.models import Job
from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.test_run_table import log_in
from tests.telemetry.helpers import LiveServer, add_attempt
from tests.telemetry.test_compare import add_curve

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def run(served: LiveServer, lr: float, losses: list[float], t0: float = 1e9) -> int:
    job_id, attempt = add_attempt(served.db, state="succeeded")
    with served.db.session() as session:
        job = session.get_one(Job, job_id)
        job.name = f"lr{lr}"
        job.spec = {**job.spec, "hyperparameters": {"lr": lr}}
    add_curve(served.db, attempt, "loss", losses, t0=t0)
    add_curve(served.db, attempt, "grad_norm", [1.0 + s % 5 for s in range(len(losses))], t0=t0)
    return job_id


def test_compare_clips_a_spike_sets_a_y_range_and_downloads_from_one_menu(
    page: Page, served: LiveServer
) -> None:
    calm = [2.0 - s / 100 for s in range(80)]
    ids = [run(served, 0.01, calm), run(served, 0.03, [v + 0.1 for v in calm])]
    ids.append(run(served, 0.3, [*calm[:40], 5e4, *calm[41:]]))  # lr=0.3 blows up once
    log_in(page, served)
    page.goto(f"{served.url}/compare?jobs={','.join(map(str, ids))}")
    chart = page.get_by_test_id("compare-chart-loss")
    expect(chart).to_have_attribute("data-points", str(3 * 80))
    expect(chart).to_have_attribute("data-y-max", re.compile(r"^[1-9]\d{4}"))  # the spike sets it

    page.get_by_test_id("compare-clip").check()
    expect(chart).to_have_attribute("data-y-max", re.compile(r"^2(\.\d+)?$"))
    assert 1.1 < float(chart.get_attribute("data-y-min") or 0) < 1.3
    page.screenshot(path=str(SCREENSHOTS / "compare-clipped.png"), full_page=False)

    page.get_by_test_id("compare-ymin").fill("1.5")
    page.get_by_test_id("compare-ymax").fill("1.8")
    page.get_by_test_id("compare-ymax").press("Tab")
    expect(chart).to_have_attribute("data-y-max", "1.8")
    expect(chart).to_have_attribute("data-y-min", "1.5")
    # the typed range is the loss chart's (the metric chosen beside it), not grad_norm's
    expect(page.get_by_test_id("compare-y-metric")).to_have_value("loss")
    grad = page.get_by_test_id("compare-chart-grad_norm")
    expect(grad).to_have_attribute("data-y-max", re.compile(r"^5(\.\d+)?$"))

    # smoothing keeps the raw curves drawn (faint), the points counted once
    page.get_by_test_id("compare-smoothing").fill("0.8")
    names = [f"#{i} lr{lr}" for i, lr in zip(ids, (0.01, 0.03, 0.3), strict=True)]
    expect(chart).to_have_attribute("data-series", "|".join([f"{n} (raw)" for n in names] + names))
    expect(chart).to_have_attribute("data-points", str(3 * 80))

    # relative time on x: ticks as durations, the axis says what it is
    page.get_by_test_id("compare-x").select_option("time")
    expect(page.get_by_test_id("compare-curve-loss")).to_have_attribute("data-x", "time")
    expect(chart).to_have_attribute("data-axes", re.compile(r"^time since each job's start\|"))

    # one number format: 4 significant digits in the legend's text, the summary and the axes
    expect(page.get_by_test_id(f"summary-loss-{ids[0]}")).to_have_text("1.210 (1.210 @ 79)")
    expect(chart).to_have_attribute("aria-label", re.compile(rf"#{ids[0]} lr0\.01 1\.\d{{3}} at "))

    # one "Download CSV" menu, a metric per entry, on the chosen x axis
    menu = page.get_by_test_id("compare-csv")
    box = menu.bounding_box()
    assert box is not None and box["height"] < 36 and box["width"] < 160, box
    expect(page.locator("[data-testid^=compare-csv-]:visible")).to_have_count(0)
    menu.locator("summary").click()
    expect(page.get_by_test_id("compare-csv-loss")).to_be_visible()
    expect(page.get_by_test_id("compare-csv-grad_norm")).to_be_visible()
    href = page.get_by_test_id("compare-csv-loss").get_attribute("href") or ""
    assert href.endswith("&metric=loss&x=time"), href
    with page.expect_download() as caught:
        page.get_by_test_id("compare-csv-loss").click()
    assert caught.value.suggested_filename.endswith(".csv")
    page.screenshot(path=str(SCREENSHOTS / "compare-csv-menu.png"), full_page=False)


def test_compare_lays_runs_by_wall_clock_or_from_each_ones_start(
    page: Page, served: LiveServer
) -> None:
    calm = [2.0 - s / 100 for s in range(80)]
    first = run(served, 0.01, calm, t0=1e9)
    later = run(served, 0.03, calm, t0=1e9 + 3600)  # started an hour after the first
    log_in(page, served)
    page.goto(f"{served.url}/compare?jobs={first},{later}")
    chart = page.get_by_test_id("compare-chart-loss")
    options = page.get_by_test_id("compare-x").locator("option")
    expect(options).to_have_text(["step", "wall time", "relative time", "device-hours used"])
    expect(page.get_by_test_id("compare-starts")).to_have_count(0)  # by step: no clock

    # relative time: both runs from 0, overlaid on the same 80 x values
    page.get_by_test_id("compare-x").select_option("time")
    expect(chart).to_have_attribute(
        "aria-label", re.compile(r"by time since each job's start, 80 points")
    )
    starts = [
        page.get_by_test_id(f"compare-start-{i}").text_content() or "" for i in (first, later)
    ]
    assert starts[0] != starts[1] and all(re.search(r"\d:\d\d", s) for s in starts), starts

    # wall time: the clock on x, the later run an hour to the right (160 distinct x values)
    page.get_by_test_id("compare-x").select_option("wall")
    expect(page.get_by_test_id("compare-curve-loss")).to_have_attribute("data-x", "wall")
    expect(chart).to_have_attribute("data-axes", re.compile(r"^wall time\|"))
    expect(chart).to_have_attribute("aria-label", re.compile(r"by wall time, 160 points"))
    newest = rf"#{later} lr0\.03 1\.210 at wall time 1000003679"  # 1e9 + 3600 + 79 s
    expect(chart).to_have_attribute("aria-label", re.compile(newest))
    expect(chart).to_have_attribute("data-points", str(2 * 80))
    page.get_by_test_id("compare-csv").locator("summary").click()
    href = page.get_by_test_id("compare-csv-loss").get_attribute("href") or ""
    assert href.endswith("&metric=loss&x=wall"), href
    page.get_by_test_id("compare-csv").locator("summary").click()  # closed again
    chart.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "compare-wall-time.png"), full_page=False)
