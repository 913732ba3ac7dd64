"""The cluster page shows each node's data disk, and `disk low` with why it gets no new work."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.helpers import log_in, submit_job
from tests.full_disk import fill_leaving, small_filesystem
from tests.job_users import reachable
from tests.stack import RunningStack, trainboard_up

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MIB = 1 << 20


@pytest.fixture
def small_disk_stack(tmp_path: Path) -> Iterator[RunningStack]:
    """`trainboard up` whose data dir is a 64 MiB tmpfs (disk low below 5%: 3.2 MiB)."""
    tmp = reachable(tmp_path)
    with small_filesystem(tmp / "data", size="64M"), trainboard_up(tmp) as stack:
        yield stack


def test_a_nearly_full_data_disk_shows_disk_low_on_the_cluster_page_and_new_work_waits(
    page: Page, small_disk_stack: RunningStack
) -> None:
    stack = small_disk_stack
    log_in(page, stack)
    page.get_by_test_id("nav-cluster").click()
    disk = page.get_by_test_id("disk-local")
    expect(disk).to_contain_text("Data disk")
    expect(disk).to_contain_text("free of 64.0 MiB")
    expect(page.get_by_test_id("disk-low-local")).to_have_count(0)

    ballast = fill_leaving(stack.data_dir, 2 * MIB)  # the database can still be written
    badge = page.get_by_test_id("disk-low-local")
    expect(badge).to_have_text("disk low")  # from the next heartbeats, live
    reason = page.get_by_test_id("disk-low-reason-local")
    expect(reason).to_contain_text("disk low (")
    expect(reason).to_contain_text("MiB free): no new work is placed on this node")
    expect(page.get_by_test_id("node-local")).to_contain_text("up")  # the node itself is fine

    job_id = submit_job(stack, "waits-for-disk", steps=20, checkpoint_every=None)
    page.get_by_test_id("nav-board").click()
    expect(page.get_by_test_id(f"wait-reason-{job_id}")).to_contain_text("disk low")
    page.get_by_test_id("nav-cluster").click()
    expect(badge).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / "cluster-disk-low.png"), full_page=True)

    ballast.unlink()
    expect(badge).to_have_count(0)
    page.get_by_test_id("nav-board").click()
    expect(page.get_by_test_id(f"job-row-{job_id}")).to_have_attribute("data-state", "succeeded")
