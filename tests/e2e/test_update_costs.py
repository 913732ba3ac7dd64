"""The update costs panel (#35) on real runs: each mode's per-rank step time and bytes, with
rank 1 slowed on purpose (spec.straggler), so the panel shows it slow sync and not async."""

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
#: rank 1 of every run takes this much longer a step (an mlp step here takes a few ms)
STRAGGLER = {"rank": 1, "delay_ms": 60}


def measured(page: Page, test_id: str, attribute: str) -> float:
    value = page.get_by_test_id(test_id).get_attribute(attribute)
    assert value, f"{test_id} has no {attribute}"
    return float(value)


def test_compare_shows_what_each_update_mode_costs_per_rank(
    page: Page, stack: RunningStack
) -> None:
    jobs = {
        name: submit_job(
            stack,
            f"update-{name}",
            steps=40,
            devices=2,
            parallelism=fields,
            straggler=STRAGGLER,
        )
        for name, fields in MODES.items()
    }
    try:
        for job_id in jobs.values():  # a failed run fails the test at once, saying why
            finished = wait_state(stack, job_id, "succeeded", "failed", timeout=600)
            assert finished["state"] == "succeeded", finished["reason"]

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
        # the straggler: under sync rank 0's steps take about as long as the slowed rank 1's
        # (each waits for the other's gradient); under async rank 0 steps on at its own pace
        for sync in (ddp, ps):
            slowed = measured(page, f"cost-time-{sync}-1", "data-value")
            assert slowed >= STRAGGLER["delay_ms"] / 1000
            assert measured(page, f"cost-time-{sync}-0", "data-value") >= 0.5 * slowed
        free = jobs["async"]
        assert measured(page, f"cost-time-{free}-0", "data-value") <= 0.5 * measured(
            page, f"cost-time-{free}-1", "data-value"
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
