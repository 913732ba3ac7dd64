"""Script mode: the API refusing a script path shows next to the field; then a template job."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.helpers import cancel_quietly, get_job, log_in, open_submit, submitted_job_id
from tests.stack import RunningStack

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_script_path_refusals_show_next_to_the_field_then_a_template_job_submits(
    page: Page, stack: RunningStack
) -> None:
    log_in(page, stack)
    open_submit(page, name="browser-script")
    page.get_by_test_id("submit-mode-script").check()
    expect(page.get_by_test_id("submit-template")).to_have_count(0)
    expect(page.get_by_test_id("hp-lr")).to_have_count(0)
    page.get_by_test_id("submit-devices").fill("2")
    page.get_by_test_id("submit-args").fill("--epochs 3 --name 'my run'\n--lr\n0.1")
    expect(page.get_by_test_id("submit-args-preview")).to_have_attribute("data-count", "6")
    expect(page.get_by_test_id("implied-dp")).to_have_text("2")

    error = page.get_by_test_id("field-error-entrypoint.script")
    page.get_by_test_id("submit-script").fill("../escape.py")
    page.get_by_test_id("submit-button").click()
    expect(error).to_contain_text("must not contain '..'")
    expect(page).to_have_url(re.compile(r".*/submit$"))

    page.get_by_test_id("submit-script").fill("missing.py")
    page.get_by_test_id("submit-button").click()
    expect(error).to_contain_text("'missing.py' was not found under the allowed roots")
    expect(error).not_to_contain_text("must not contain")  # the previous refusal is gone
    expect(page).to_have_url(re.compile(r".*/submit$"))
    page.evaluate("window.scrollTo(0, 0)")  # the sticky header would cover the form otherwise
    page.screenshot(path=str(SCREENSHOTS / "submit-script.png"), full_page=True)

    page.get_by_test_id("submit-mode-template").check()
    page.get_by_test_id("submit-template").select_option("mlp")
    page.get_by_test_id("hp-steps").fill("20")
    page.get_by_test_id("submit-devices").fill("1")
    page.get_by_test_id("submit-button").click()
    job_id = submitted_job_id(page)
    try:
        expect(page.get_by_test_id("job-state")).to_be_visible()
        spec = get_job(stack, job_id)["spec"]
        assert spec["template"] == "mlp"
        assert spec["entrypoint"] is None
        assert spec["hyperparameters"]["steps"] == 20
    finally:
        cancel_quietly(stack, job_id)
