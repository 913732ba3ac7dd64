"""Checkpoints from the job page: listed with step and size, one downloaded and loaded back
with torch.load(weights_only=True), and a clone started from an older one (not the newest)
that trains on from that step."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from playwright.sync_api import Page, expect

from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.helpers import cancel_quietly, get_job, log_in, wait_state
from tests.stack import RunningStack

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_download_a_checkpoint_and_clone_from_an_older_step(
    page: Page, stack: RunningStack, tmp_path: Path
) -> None:
    spec = {
        "name": "ckpt-source",
        "template": "mlp",
        "parallelism": {"devices": 1},
        "hyperparameters": {"steps": 60, "batch_size": 16, "hidden": 16, "layers": 2},
        "checkpoint": {"every_steps": 20, "keep_last": 5},
    }
    with stack.client() as client:
        source = client.post("/api/jobs", json=spec).json()["id"]
    clone = None
    try:
        wait_state(stack, source, "succeeded")
        log_in(page, stack)
        page.goto(f"{stack.url}/jobs/{source}")
        for step in (20, 40, 60):
            expect(page.get_by_test_id(f"checkpoint-{step}")).to_contain_text("KiB")
        with page.expect_download() as download:
            page.get_by_test_id("download-20").click()
        assert download.value.suggested_filename == f"job-{source}-step-20.pt"
        path = tmp_path / "step-20.pt"
        download.value.save_as(path)
        weights = torch.load(path, weights_only=True)
        assert weights and all(isinstance(t, torch.Tensor) for t in weights.values())
        assert any(name.endswith("weight") for name in weights), list(weights)
        page.evaluate("window.scrollTo(0, 0)")  # the sticky header would cover the page otherwise
        page.screenshot(path=str(SCREENSHOTS / "job-checkpoints.png"), full_page=True)

        # "Clone from step 20…" opens the form, filled with the spec, nothing started yet
        page.get_by_test_id("clone-from-20").click()
        expect(page).to_have_url(re.compile(rf".*/submit\?clone={source}&from_step=20$"))
        expect(page.get_by_test_id("clone-from-step")).to_have_text("step 20")
        expect(page.get_by_test_id("submit-name")).to_have_value("ckpt-source (from step 20)")
        expect(page.get_by_test_id("hp-steps")).to_have_value("60")
        page.get_by_test_id("hp-lr").fill("0.002")
        page.get_by_test_id("submit-button").click()
        expect(page).to_have_url(re.compile(rf".*/jobs/(?!{source}$)\d+$"))  # the clone's page
        clone = int(page.url.rsplit("/", 1)[1])
        assert clone != source
        expect(page.locator("h1")).to_contain_text("ckpt-source (from step 20)")
        wait_state(stack, clone, "succeeded")
        with stack.client() as client:
            attempt = client.get(f"/api/jobs/{clone}/attempts").json()[0]
            loss = client.get(f"/api/jobs/{clone}/metrics/loss").json()
            other = client.get(
                f"/api/jobs/{source}/checkpoints/20/download",
                headers={"Authorization": "Bearer nobody"},
            )
        assert attempt["resume_from"].endswith(f"job-{source}/checkpoints/attempt-1/step-20")
        assert loss["step"][0] == 21 and loss["step"][-1] == 60  # trained on from step 20
        assert get_job(stack, clone)["spec"]["hyperparameters"]["lr"] == 0.002
        assert other.status_code == 401
    finally:
        cancel_quietly(stack, source, *([clone] if clone else []))
