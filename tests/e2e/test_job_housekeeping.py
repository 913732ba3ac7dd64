"""After submit, in the browser: rename, tags, notes in markdown (shown as text where it is
HTML), archive (hidden from the board, restorable, a filter to show), and bulk cancel and
archive of rows selected on the board."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.helpers import cancel_quietly, get_job, log_in, submit_job, wait_state
from tests.stack import RunningStack

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTES = """# Why this run
lr **too** high, see `lr`; <img src=x onerror="window.pwned=1"> [doc](https://example.com)
- one
- two"""


def test_rename_tags_notes_and_archive_on_the_job_page(page: Page, stack: RunningStack) -> None:
    job_id = submit_job(stack, "to-rename", steps=20, checkpoint_every=None)
    try:
        log_in(page, stack)
        page.goto(f"{stack.url}/jobs/{job_id}")
        page.get_by_test_id("rename-button").click()
        page.get_by_test_id("name-input").fill("renamed run")
        page.get_by_test_id("save-edit").click()
        expect(page.locator("h1")).to_contain_text("renamed run")
        page.get_by_test_id("tags-button").click()
        page.get_by_test_id("tags-input").fill("baseline, lr:0.01")
        page.get_by_test_id("save-edit").click()
        expect(page.get_by_test_id("job-tags")).to_have_text("baselinelr:0.01")
        page.get_by_test_id("notes-button").click()
        page.get_by_test_id("notes-input").fill(NOTES)
        page.get_by_test_id("save-edit").click()
        expect(page.get_by_test_id("notes-input")).to_have_count(0)
        notes = page.get_by_test_id("notes-rendered")
        expect(notes.locator("h3")).to_have_text("Why this run")
        expect(notes.locator("strong")).to_have_text("too")
        expect(notes.locator("li")).to_have_count(2)
        expect(notes.locator("a[href='https://example.com']")).to_have_text("doc")
        expect(notes).to_contain_text('<img src=x onerror="window.pwned=1">')  # text, not HTML
        assert notes.locator("img").count() == 0
        assert page.evaluate("window.pwned") is None
        job = get_job(stack, job_id)
        assert (job["name"], job["tags"], job["notes"]) == (
            "renamed run",
            ["baseline", "lr:0.01"],
            NOTES,
        )
        page.get_by_test_id("tags-button").click()
        page.get_by_test_id("tags-input").fill("no spaces allowed!")
        page.get_by_test_id("save-edit").click()
        expect(page.get_by_test_id("edit-error")).to_contain_text("tags")
        page.get_by_role("button", name="Cancel", exact=True).click()
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        page.screenshot(path=str(SCREENSHOTS / "job-notes.png"), full_page=True)

        page.get_by_test_id("archive-button").click()
        expect(page.get_by_test_id("archived-tag")).to_be_visible()
        page.get_by_test_id("nav-board").click()
        expect(page.get_by_test_id("show-archived")).to_be_visible()
        expect(page.get_by_test_id(f"job-row-{job_id}")).to_have_count(0)
        page.get_by_test_id("show-archived").check()
        expect(page.get_by_test_id(f"job-row-{job_id}")).to_contain_text("archived")
        page.get_by_test_id(f"job-row-{job_id}").get_by_role("link", name="renamed run").click()
        page.get_by_test_id("archive-button").click()  # restore
        expect(page.get_by_test_id("archived-tag")).to_have_count(0)
        assert get_job(stack, job_id)["archived"] is False
    finally:
        cancel_quietly(stack, job_id)


def test_bulk_cancel_and_archive_rows_selected_on_the_board(
    page: Page, stack: RunningStack
) -> None:
    long = [
        submit_job(stack, f"bulk-{i}", steps=1_000_000, checkpoint_every=None) for i in range(2)
    ]
    short = submit_job(stack, "bulk-done", steps=10, checkpoint_every=None)
    try:
        wait_state(stack, short, "succeeded")
        log_in(page, stack)
        for job_id in long:
            page.get_by_test_id(f"select-{job_id}").check()
        page.get_by_test_id("bulk-cancel").click()
        page.get_by_test_id("bulk-cancel-confirm").click()  # it asks first (issue #33)
        expect(page.get_by_test_id("bulk-result")).to_have_text("2 cancelled")
        for job_id in long:
            wait_state(stack, job_id, "cancelled", timeout=120)
        for job_id in [*long, short]:
            page.get_by_test_id(f"select-{job_id}").check()
        page.get_by_test_id("bulk-archive").click()
        expect(page.get_by_test_id("bulk-result")).to_have_text("3 archived")
        for job_id in [*long, short]:
            expect(page.get_by_test_id(f"job-row-{job_id}")).to_have_count(0)
        page.get_by_test_id("show-archived").check()
        for job_id in [*long, short]:
            page.get_by_test_id(f"select-{job_id}").check()
        # all finished: Cancel is not offered for them
        expect(page.get_by_test_id("bulk-archive")).to_be_visible()
        expect(page.get_by_test_id("bulk-cancel")).to_have_count(0)
        page.get_by_test_id("bulk-restore").click()
        expect(page.get_by_test_id("bulk-result")).to_have_text("3 restored")
        page.get_by_test_id("show-archived").uncheck()
        for job_id in [*long, short]:
            expect(page.get_by_test_id(f"job-row-{job_id}")).to_be_visible()
    finally:
        cancel_quietly(stack, *long, short)
