"""A sweep of 8 small mlp trials from the browser: at most 2 run at once, ASHA stops the
trials whose learning rate is too small to learn at a rung (an event says why), the page
shows the trials and the best so far, and the sweep ends."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.helpers import cancel_quietly, log_in, wait_state
from tests.stack import RunningStack, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# good and useless learning rates, alternating: every pair that runs together has one of
# each, so at each rung a flat trial meets a learning one and is in the worse half
LRS = [0.1, 1e-6, 0.05, 2e-6, 0.08, 3e-6, 0.03, 4e-6]
SWEEP = f"""name: browser-sweep
method: grid
max_concurrency: 2
metric: loss
mode: min
parameters:
  hyperparameters.lr:
    values: {LRS}
early_stopping:
  rule: asha
  rungs: [50, 500, 1500]
  reduction_factor: 2
  min_trials: 2
base:
  name: sweep-trial
  template: mlp
  parallelism: {{devices: 1}}
  checkpoint: {{every_steps: 1000}}
  hyperparameters: {{steps: 3000, batch_size: 16, hidden: 16, layers: 2, dataset_size: 512}}
"""


@pytest.mark.timeout(900)  # 8 rank starts, 2 at a time, on 2 shared cores
def test_a_sweep_of_8_trials_stops_poor_ones_at_a_rung(page: Page, stack: RunningStack) -> None:
    log_in(page, stack)
    page.get_by_test_id("nav-sweeps").click()
    page.get_by_test_id("sweep-yaml").fill(SWEEP)
    page.get_by_test_id("start-sweep").click()
    expect(page).to_have_url(re.compile(r".*/sweeps/\d+$"))
    sweep_id = int(page.url.rsplit("/", 1)[1])
    trials = page.get_by_test_id("sweep-trials")
    try:
        expect(trials.locator("tbody tr")).to_have_count(8)
        with stack.client() as client:

            def live_at_most_two() -> bool:
                body = client.get(f"/api/sweeps/{sweep_id}").json()
                live = [
                    t for t in body["trials"] if t["state"] in ("queued", "scheduled", "running")
                ]
                assert len(live) <= 2, body["trials"]
                return bool(body["state"] == "finished")

            wait_for(live_at_most_two, timeout=600, what="the sweep to finish", interval=0.5)
            sweep = client.get(f"/api/sweeps/{sweep_id}").json()
            job = sweep["trials"][1]["job_id"]
            events = client.get(f"/api/jobs/{job}/events").json()
        states = [t["state"] for t in sweep["trials"]]
        stopped = [t for t in sweep["trials"] if t["state"] == "stopped"]
        flat = [t for t in sweep["trials"] if t["setting"]["hyperparameters.lr"] < 1e-5]
        assert [t["state"] for t in flat] == ["stopped"] * 4, states  # none learns
        assert all(s in ("succeeded", "stopped") for s in states), states
        for trial in stopped:
            assert re.match(
                r"stopped early at rung [123] \(step (50|500|1500)\): "
                r"loss [\d.]+ > threshold [\d.]+ \(ASHA: best 1/2 of \d trials at this rung\)$",
                trial["early_stop"],
            ), trial
        assert sweep["best"]["setting"]["hyperparameters.lr"] in LRS[0::2]
        assert sweep["best"]["state"] == "succeeded"
        assert any(
            e["kind"] == "early_stopped" and e["message"] == sweep["trials"][1]["early_stop"]
            for e in events
        )

        expect(page.get_by_test_id("sweep-state")).to_have_text("finished")
        row = page.get_by_test_id("trial-2")
        expect(row).to_have_attribute("data-state", "stopped")
        expect(page.get_by_test_id("trial-why-2")).to_contain_text("stopped early at rung")
        expect(page.get_by_test_id("sweep-best")).to_contain_text(
            f"trial {sweep['best']['number']}"
        )
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        page.screenshot(path=str(SCREENSHOTS / "sweep.png"), full_page=True)
        page.get_by_role("link", name=f"#{sweep['trials'][1]['job_id']}", exact=True).click()
        expect(page.get_by_test_id("job-state")).to_have_text("stopped")
        expect(page.get_by_test_id("job-reason")).to_contain_text("stopped early at rung")
        expect(page.get_by_test_id("job-sweep")).to_contain_text(f"sweep {sweep_id}")
    finally:
        with stack.client() as client:  # a failed test leaves no trial running
            if client.get(f"/api/sweeps/{sweep_id}").json()["state"] == "running":
                client.post(f"/api/sweeps/{sweep_id}/cancel")


def test_cancelling_a_sweep_from_its_page_cancels_its_trials(
    page: Page, stack: RunningStack
) -> None:
    body = {
        "name": "browser-sweep-cancel",
        "method": "random",
        "trials": 5,
        "max_concurrency": 2,
        "parameters": {"hyperparameters.lr": {"min": 0.01, "max": 0.1, "log": True}},
        "base": {
            "name": "long-trial",
            "template": "mlp",
            "parallelism": {"devices": 1},
            "hyperparameters": {"steps": 1_000_000},
        },
    }
    with stack.client() as client:
        created = client.post("/api/sweeps", json=body)
        assert created.status_code == 201, created.text
        sweep_id = created.json()["id"]
        jobs = [t["job_id"] for t in created.json()["trials"] if t["job_id"]]
    assert len(jobs) == 2
    try:
        for job_id in jobs:
            wait_state(stack, job_id, "running")
        log_in(page, stack)
        page.goto(f"{stack.url}/sweeps/{sweep_id}")
        expect(page.get_by_test_id("trial-3")).to_have_attribute("data-state", "pending")
        page.get_by_test_id("cancel-sweep").click()
        expect(page.get_by_test_id("sweep-state")).to_have_text("cancelled")
        for job_id in jobs:
            wait_state(stack, job_id, "cancelled", timeout=120)
        page.reload()
        for number in (1, 2):
            expect(page.get_by_test_id(f"trial-{number}")).to_have_attribute(
                "data-state", "cancelled"
            )
        for number in (3, 4, 5):  # never started
            expect(page.get_by_test_id(f"trial-{number}")).to_have_attribute(
                "data-state", "pending"
            )
    finally:
        cancel_quietly(stack, *jobs)
