"""What acts on jobs asks first (issue #33 item 9), on an API serving stored jobs without
workers (the `served` fixture): the board's bulk Cancel confirms like a single cancel, names
the jobs it will cancel and is not offered for finished ones; Escape keeps them.

(Clone from step N opening a filled form is shown end to end, checkpoint on disk and all,
by tests/e2e/test_checkpoints.py.)
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select

from backend.jobs.models import Job
from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.test_run_table import log_in
from tests.telemetry.helpers import LiveServer, add_attempt

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def named(served: LiveServer, state: str, name: str) -> int:
    job_id, _ = add_attempt(served.db, state=state)
    with served.db.session() as session:
        job = session.get_one(Job, job_id)
        job.name, job.attempt = name, 1
        job.spec = {**job.spec, "name": name}
    return job_id


def states(served: LiveServer, *ids: int) -> list[str]:
    with served.db.session() as session:
        return [session.scalar(select(Job.state).where(Job.id == i)) or "" for i in ids]


def test_bulk_cancel_asks_first_and_leaves_finished_jobs_out(
    page: Page, served: LiveServer
) -> None:
    running = [named(served, "running", f"bulk-running-{i}") for i in range(2)]
    done = named(served, "succeeded", "bulk-done")
    log_in(page, served)
    for job_id in [*running, done]:
        page.get_by_test_id(f"select-{job_id}").check()

    # offered for the two that can still be cancelled, not the finished one
    cancel = page.get_by_test_id("bulk-cancel")
    expect(cancel).to_have_text("Cancel 2…")
    cancel.click()
    confirm = page.get_by_test_id("confirm-bulk-cancel")
    expect(confirm).to_contain_text(f"Cancel 2 jobs (#{running[0]}, #{running[1]})?")
    expect(confirm).to_contain_text("1 finished job stays as it is.")
    page.screenshot(path=str(SCREENSHOTS / "board-bulk-cancel-confirm.png"), full_page=False)

    # Escape (or "Keep them") cancels nothing
    page.keyboard.press("Escape")
    expect(confirm).to_have_count(0)
    page.get_by_test_id("bulk-cancel").click()
    page.get_by_test_id("bulk-cancel-dismiss").click()
    expect(confirm).to_have_count(0)
    page.wait_for_timeout(500)
    assert states(served, *running) == ["running", "running"]

    # confirmed: exactly the two are asked to cancel, the finished one is not refused by name
    page.get_by_test_id("bulk-cancel").click()
    page.get_by_test_id("bulk-cancel-confirm").click()
    expect(page.get_by_test_id("bulk-result")).to_have_text("2 cancelled")
    assert "running" not in states(served, *running)
    assert states(served, done) == ["succeeded"]

    # only finished jobs selected: no Cancel at all, archive still offered
    page.get_by_test_id(f"select-{done}").check()
    expect(page.get_by_test_id("bulk-archive")).to_be_visible()
    expect(page.get_by_test_id("bulk-cancel")).to_have_count(0)
