"""The job page as a W&B user reads it (issue #33), on an API serving stored data without
workers (the `served` fixture): the charts first at 1280x800; x by step, wall time or
relative time; smoothing that keeps the raw curves (faint); a typed y range and outlier
clipping; a text alternative per chart; byte axes in whole units with a unit-free label;
device charts from the job's own start, not a slot's earlier load from other jobs, and for a
restarted job every attempt's span on its own devices.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

import pytest
from playwright.sync_api import Page, expect

from backend.jobs.models import Attempt, Job
from backend.telemetry.models import DeviceSample
from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.test_run_table import log_in
from tests.telemetry.helpers import LiveServer, add_attempt, insert_points

pytestmark = [pytest.mark.browser, pytest.mark.slow]
STEPS = 60
SPIKE = 30  # rank 1's loss blows up at this step: 1e6 against values around 1


def running_job(served: LiveServer) -> tuple[int, float]:
    """A job on node-a's slot 0 since `start`, 2 ranks of loss and peak_mem; (id, start)."""
    start = float(int(time.time()) - 120)  # whole seconds: the claim time keeps microseconds
    job_id, attempt = add_attempt(served.db, state="running")
    with served.db.session() as session:
        job = session.get_one(Job, job_id)
        job.name, job.attempt = "charts", 1
        job.started_at = datetime.fromtimestamp(start, UTC)
        session.get_one(Attempt, attempt).claimed_at = job.started_at
        # the slot ran another job's load before this one started: 20 samples before start
        session.add_all(
            DeviceSample(node="node-a", device=0, kind="cpu", time=start + t, util=90.0,
                         mem_used=2 * 2**30, mem_total=64 * 2**30)
            for t in range(-100, 0, 5)
        )  # fmt: skip
        session.add_all(
            DeviceSample(node="node-a", device=0, kind="cpu", time=start + t, util=40.0,
                         mem_used=400_000_000 + t * 1000, mem_total=64 * 2**30)
            for t in range(0, 120, 5)
        )  # fmt: skip
    points = [
        {"attempt_id": attempt, "rank": rank, "step": s, "name": "loss", "time": start + s,
         "value": 1e6 if (rank, s) == (1, SPIKE) else 2.0 - s / STEPS + 0.05 * (s % 3)}
        for s in range(STEPS)
        for rank in (0, 1)
    ] + [
        {"attempt_id": attempt, "rank": 0, "step": s, "name": "peak_mem", "time": start + s,
         "value": 400_000_000.0}
        for s in range(STEPS)
    ]  # fmt: skip
    insert_points(served.db, points)
    return job_id, start


def y_bounds(page: Page, test_id: str, drawn: str = r".") -> tuple[float, float]:
    """The y range the chart last drew (a changed setting redraws it: wait for both ends,
    the top matching `drawn`)."""
    chart = page.get_by_test_id(test_id)
    expect(chart).to_have_attribute("data-y-min", re.compile(r"."))
    expect(chart).to_have_attribute("data-y-max", re.compile(drawn))
    return float(chart.get_attribute("data-y-min") or "nan"), float(
        chart.get_attribute("data-y-max") or "nan"
    )


def test_the_run_page_reads_like_a_w_and_b_run(page: Page, served: LiveServer) -> None:
    job_id, _start = running_job(served)
    log_in(page, served)
    page.goto(f"{served.url}/jobs/{job_id}")
    loss = page.get_by_test_id("loss-chart")
    expect(loss).to_have_attribute("data-points", str(2 * STEPS))

    # the charts first: the whole loss chart in the first 1280x800 screen
    box = loss.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 800, box
    page.screenshot(path=str(SCREENSHOTS / "job-charts-first.png"), full_page=False)

    # a text alternative: what it draws and each rank's newest value
    expect(loss).to_have_attribute("role", "img")
    summary = re.compile(r"^loss by step, 60 points: rank 0 .* at step 59; rank 1 ")
    expect(loss).to_have_attribute("aria-label", summary)

    # x by wall time, then relative time (seconds since the first point)
    page.get_by_test_id("chart-x").select_option("wall")
    expect(loss).to_have_attribute("data-axes", re.compile(r"^wall time\|"))
    expect(loss).to_have_attribute("data-points", str(2 * STEPS))
    page.get_by_test_id("chart-x").select_option("relative")
    expect(loss).to_have_attribute("aria-label", re.compile(r"at time since the first point 59;"))
    page.get_by_test_id("chart-x").select_option("step")

    # outlier clipping: rank 1's spike no longer sets the y range
    _, top = y_bounds(page, "loss-chart")
    assert top >= 1e6, top
    page.get_by_test_id("chart-clip").check()
    low, high = y_bounds(page, "loss-chart", drawn=r"^\d(\.\d*)?$")
    assert 0.8 < low < 1.2 and 1.9 < high < 2.5, (low, high)

    # a typed y range wins; a wrong one is refused next to the fields
    page.get_by_test_id("chart-ymin").fill("0.5")
    page.get_by_test_id("chart-ymax").fill("3")
    page.get_by_test_id("chart-ymax").press("Tab")
    expect(loss).to_have_attribute("data-y-max", "3")
    expect(loss).to_have_attribute("data-y-min", "0.5")
    page.get_by_test_id("chart-ymin").fill("5")
    page.get_by_test_id("chart-ymin").press("Tab")
    expect(page.get_by_test_id("chart-range-problem")).to_have_text("y min must be below y max")
    page.get_by_test_id("chart-y-reset").click()
    expect(page.get_by_test_id("chart-range-problem")).to_have_count(0)

    # smoothing keeps each raw curve, drawn faint under its smoothed one; points are not doubled
    page.get_by_test_id("chart-clip").check()
    page.get_by_test_id("chart-smoothing").fill("0.9")
    expect(page.get_by_test_id("chart-smoothing-value")).to_have_text("0.90")
    expect(loss).to_have_attribute("data-series", "rank 0 (raw)|rank 1 (raw)|rank 0|rank 1")
    expect(loss).to_have_attribute("data-points", str(2 * STEPS))
    _, high = y_bounds(page, "loss-chart", drawn=r"^\d(\.\d*)?$")
    assert high < 2.5, high  # clipped on the raw values: the smoothed spike runs off the chart too
    loss.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "job-charts-smoothing.png"), full_page=False)

    # bytes: whole binary units, the unit in the ticks and not in the label
    mem = page.get_by_test_id("metric-chart-peak_mem")
    expect(mem).to_have_attribute("data-y-labels", re.compile(r"MiB"))
    labels = [v for v in (mem.get_attribute("data-y-labels") or "").split("|") if v]
    assert all(re.fullmatch(r"\d+(\.\d{1,2})? (B|KiB|MiB|GiB)", v) for v in labels), labels
    assert not any(v.endswith(".470 MiB") for v in labels), labels
    expect(mem).to_have_attribute("data-axes", re.compile(r"\|peak_mem$"))

    # the slot's chart starts at this job's start: the other job's 20 samples before it are left out
    device = page.get_by_test_id("device-chart-0")
    expect(device).to_have_attribute("data-samples", "24")
    expect(device).to_have_attribute("data-axes", re.compile(r"\|CPU \(%\)\|RSS$"))
    # the slot's "total" is the host's RAM, said so, not drawn as the slot's own capacity
    shared = re.compile(r"RSS of the host's 64\.0 GiB RAM, shared by its CPU slots")
    expect(device).to_have_attribute("aria-label", shared)
    rss = [v for v in (device.get_attribute("data-y2-labels") or "").split("|") if v]
    assert rss and all(re.fullmatch(r"\d+ (KiB|MiB)", v) for v in rss), rss
    device.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "job-device-since-start.png"), full_page=False)


def restarted_job(served: LiveServer) -> tuple[int, float]:
    """A job whose attempt 1 ran on node-a slot 0 for [t0, t0+60] and whose attempt 2 has run
    on slot 1 since t0+120; both slots ran another job's load all along; (id, t0)."""
    t0 = float(int(time.time()) - 200)
    job_id, first = add_attempt(served.db, state="running")
    with served.db.session() as session:
        job = session.get_one(Job, job_id)
        job.name, job.attempt, job.restarts = "restarted", 2, 1
        job.started_at = datetime.fromtimestamp(t0, UTC)
        one = session.get_one(Attempt, first)
        one.state = "failed"
        one.claimed_at, one.finished_at = job.started_at, datetime.fromtimestamp(t0 + 60, UTC)
        session.add(
            Attempt(job_id=job_id, number=2, node_name="node-a", devices=[1], state="running",
                    master_port=2, claimed_at=datetime.fromtimestamp(t0 + 120, UTC))
        )  # fmt: skip
        session.add_all(
            DeviceSample(node="node-a", device=d, kind="cpu", time=t0 + t, util=10.0 + d,
                         mem_used=300_000_000, mem_total=64 * 2**30)
            for d in (0, 1) for t in range(-100, 200, 5)
        )  # fmt: skip
    return job_id, t0


def test_a_restarted_jobs_devices_show_every_attempt_from_the_jobs_start(
    page: Page, served: LiveServer
) -> None:
    job_id, _ = restarted_job(served)
    log_in(page, served)
    page.goto(f"{served.url}/jobs/{job_id}")
    spans = page.get_by_test_id("device-spans")
    expect(spans).to_contain_text("From the job's start")
    expect(page.get_by_test_id("device-span-1")).to_contain_text("attempt 1:")
    expect(page.get_by_test_id("device-span-2")).to_contain_text(re.compile(r"attempt 2: .* – now"))
    # slot 0: attempt 1's 13 samples in [t0, t0+60] only, none of the other job's before or after
    expect(page.get_by_test_id("device-chart-0")).to_have_attribute("data-samples", "13")
    # slot 1: attempt 2's samples since t0+120 (16 up to t0+195), not the other load before it
    expect(page.get_by_test_id("device-chart-1")).to_have_attribute("data-samples", "16")
    page.get_by_test_id("device-chart-0").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "job-devices-restarted.png"), full_page=False)
