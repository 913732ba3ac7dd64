"""The update costs panel (#35) on real runs: each mode's per-rank step time and bytes."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.helpers import cancel_quietly, log_in, submit_job, wait_state
from tests.stack import RunningStack

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: the four runs side by side: name → parallelism fields beside strategy data and devices 2
MODES: dict[str, dict[str, Any]] = {
    "sync-allreduce": {},
    "sync-parameter-server": {"reduce": "parameter_server"},
    "async": {"update": "async"},
    "local-sgd": {"update": "local_sgd", "sync_every": 8},
}


def measured(page: Page, test_id: str, attribute: str) -> float:
    value = page.get_by_test_id(test_id).get_attribute(attribute)
    assert value, f"{test_id} has no {attribute}"
    return float(value)


def test_compare_shows_what_each_update_mode_costs_per_rank(
    page: Page, stack: RunningStack
) -> None:
    jobs = {
        name: submit_job(stack, f"update-{name}", steps=40, devices=2, parallelism=fields)
        for name, fields in MODES.items()
    }
    try:
        for job_id in jobs.values():
            wait_state(stack, job_id, "succeeded", timeout=600)

        log_in(page, stack)
        ids = ",".join(str(j) for j in jobs.values())
        page.goto(f"{stack.url}/compare?jobs={ids}")
        panel = page.get_by_test_id("update-costs")
        expect(panel).to_be_visible()
        for name, job_id in jobs.items():
            expect(page.get_by_test_id(f"update-costs-{job_id}")).to_be_visible()
            for rank in (0, 1):
                # every rank's own step time and bytes, as the engine measured them
                assert measured(page, f"cost-time-{job_id}-{rank}", "data-value") > 0, name
                assert measured(page, f"cost-bytes-{job_id}-{rank}", "data-sent") > 0, name

        ps, ddp, local = jobs["sync-parameter-server"], jobs["sync-allreduce"], jobs["local-sgd"]
        expect(page.get_by_test_id(f"cost-mode-{ps}")).to_have_text(
            "sync, parameter server, 2 ranks"
        )
        # the worker's gradient is what rank 0 receives, rank 0's weights what the worker does
        assert measured(page, f"cost-bytes-{ps}-0", "data-received") == measured(
            page, f"cost-bytes-{ps}-1", "data-sent"
        )
        assert measured(page, f"cost-bytes-{ps}-0", "data-sent") == measured(
            page, f"cost-bytes-{ps}-1", "data-received"
        )
        # local SGD averages parameters every 8 steps: far fewer bytes per step than DDP
        assert measured(page, f"cost-bytes-{local}-0", "data-sent") < 0.5 * measured(
            page, f"cost-bytes-{ddp}-0", "data-sent"
        )
        # only async has a server queue and staleness to show
        expect(page.get_by_test_id(f"cost-staleness-{jobs['async']}")).to_contain_text(
            re.compile(r"max\s*[1-9]\d* updates")
        )
        for sync in (ddp, ps, local):
            expect(page.get_by_test_id(f"cost-staleness-{sync}")).to_have_text("—")
            expect(page.get_by_test_id(f"cost-queue-{sync}")).to_have_text("—")
        # the first screen: the four runs' curves side by side; then the panel itself
        page.screenshot(path=str(SCREENSHOTS / "compare-update-modes.png"))
        panel.screenshot(path=str(SCREENSHOTS / "compare-update-costs.png"))

        # the job page of a data-parallel job shows the same panel, its one row
        page.goto(f"{stack.url}/jobs/{jobs['async']}")
        expect(page.get_by_test_id(f"update-costs-{jobs['async']}")).to_be_visible()
        expect(page.get_by_test_id(f"cost-queue-{jobs['async']}")).to_contain_text("mean")
    finally:
        cancel_quietly(stack, *jobs.values())
