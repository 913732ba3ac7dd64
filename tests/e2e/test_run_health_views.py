"""Run-health facts in the browser: a job's efficiency and OOM event, compare by device-hours,
and the submit form's memory estimate beside each node's devices."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from backend.db import Database
from backend.jobs.models import JobEvent
from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.helpers import open_submit
from tests.telemetry.helpers import ADMIN_TOKEN, LiveServer, add_attempt
from tests.telemetry.test_efficiency import H100, _node, _ran

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _log_in(page: Page, served: LiveServer) -> None:
    page.goto(served.url + "/")
    page.get_by_test_id("login-token").fill(ADMIN_TOKEN)
    page.get_by_test_id("login-submit").click()
    expect(page.get_by_test_id("nav-board")).to_be_visible()


def _two_runs(db: Database) -> tuple[int, int]:
    """A 1-GPU job that ran an hour and a 4-CPU-slot job that ran half an hour."""
    _node(db, "gpu-node", [("gpu", H100, 80 * 2**30)])
    _node(db, "cpu-node", [("cpu", f"CPU slot {i}", 16 * 2**30) for i in range(4)])
    gpu_job, gpu_attempt = add_attempt(db, state="succeeded")
    cpu_job, cpu_attempt = add_attempt(db, state="succeeded")
    _ran(db, gpu_job, gpu_attempt, node="gpu-node", devices=1, hours=1.0)
    _ran(db, cpu_job, cpu_attempt, node="cpu-node", devices=4, hours=0.5)
    message = (
        "out of memory: restarting from the newest checkpoint with micro-batch 16 (was 32) x "
        "accumulation 2 (was 1), global batch 64 kept (reduction 1 of 2)"
    )
    with db.session() as session:
        session.add(
            JobEvent(
                job_id=gpu_job, attempt_id=gpu_attempt, kind="oom_remediation", message=message
            )
        )
    return gpu_job, cpu_job


def test_job_and_compare_pages_show_efficiency_and_compare_draws_by_device_hours(
    page: Page, served: LiveServer
) -> None:
    gpu_job, cpu_job = _two_runs(served.db)
    _log_in(page, served)

    page.goto(f"{served.url}/jobs/{gpu_job}")
    facts = page.get_by_test_id("job-efficiency")
    expect(page.get_by_test_id("eff-device-hours")).to_have_text("1.00")
    expect(page.get_by_test_id("eff-samples")).to_have_text("1,000 /s")
    expect(page.get_by_test_id("eff-mfu")).to_have_text(re.compile(r"^[0-9.]+% of fp32 peak$"))
    expect(page.get_by_test_id("job-events")).to_contain_text("oom_remediation")
    expect(page.get_by_test_id("job-events")).to_contain_text("micro-batch 16 (was 32)")
    facts.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "job-efficiency.png"), full_page=True)

    page.goto(f"{served.url}/jobs/{cpu_job}")
    expect(page.get_by_test_id("eff-device-hours")).to_have_text("2.00")
    expect(page.get_by_test_id("eff-mfu")).to_have_text(
        "none: CPU slots have no peak FLOPS to compare with"
    )

    page.goto(f"{served.url}/compare?jobs={gpu_job},{cpu_job}")
    expect(page.get_by_test_id(f"compare-device-hours-{gpu_job}")).to_have_text("1.00")
    expect(page.get_by_test_id(f"compare-device-hours-{cpu_job}")).to_have_text("2.00")
    expect(page.get_by_test_id(f"compare-samples-{cpu_job}")).to_have_text("1,000 /s")
    expect(page.get_by_test_id(f"compare-mfu-{cpu_job}")).to_contain_text("none: CPU slots")
    page.get_by_test_id("compare-x").select_option("device_hours")
    expect(page.get_by_test_id("compare-curve-loss")).to_have_attribute("data-x", "device_hours")
    chart = page.get_by_test_id("compare-chart-loss")
    expect(chart).not_to_have_attribute("data-points", "0")
    expect(chart).to_contain_text("device-hours")  # the x series of its legend
    href = page.get_by_test_id("compare-csv-loss").get_attribute("href")
    assert href is not None and href.endswith("&x=device_hours")
    csv = page.request.get(served.url + href).text().splitlines()
    assert csv[0].startswith("device_hours,") and csv[-1].startswith("2")  # 4 x 0.5 h
    page.screenshot(path=str(SCREENSHOTS / "compare-efficiency.png"), full_page=True)


def test_the_submit_form_estimates_memory_per_device_and_warns_when_it_will_not_fit(
    page: Page, served: LiveServer
) -> None:
    _node(served.db, "small", [("gpu", "NVIDIA L4", 2 * 2**30)])
    _node(served.db, "big", [("gpu", H100, 80 * 2**30)])
    _log_in(page, served)
    open_submit(page, template="gpt")
    page.get_by_test_id("hp-n_layer").fill("12")
    page.get_by_test_id("hp-n_embd").fill("1024")
    page.get_by_test_id("hp-block_size").fill("512")
    page.get_by_test_id("hp-batch_size").fill("8")
    estimate = page.get_by_test_id("memory-estimate")
    expect(estimate).to_contain_text("Memory per device")
    expect(page.get_by_test_id("memory-fit-small-0")).to_have_attribute("data-fits", "false")
    expect(page.get_by_test_id("memory-fit-big-0")).to_have_attribute("data-fits", "true")
    expect(page.get_by_test_id("memory-warning")).to_contain_text("some devices are too small")
    page.get_by_test_id("hp-batch_size").fill("4096")
    expect(page.get_by_test_id("memory-warning")).to_contain_text("it will not fit")
    expect(page.get_by_test_id("memory-fit-big-0")).to_have_attribute("data-fits", "false")
    estimate.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "submit-memory.png"), full_page=True)


def test_the_memory_estimate_on_cpu_slots_names_no_cuda_runtime(
    page: Page, served: LiveServer
) -> None:
    """Issue #33 item 10: a CPU-only cluster read "600 MiB (CUDA runtime)" beside "0.00 GiB"."""
    _node(served.db, "cpus", [("cpu", "CPU slot", 64 * 2**30), ("cpu", "CPU slot", 64 * 2**30)])
    _log_in(page, served)
    page.get_by_test_id("nav-submit").click()
    page.get_by_test_id("submit-template").select_option("mlp")
    estimate = page.get_by_test_id("memory-estimate")
    expect(page.get_by_test_id("memory-cpu")).to_contain_text("per CPU rank, in the host's RAM")
    expect(page.get_by_test_id("memory-cpu")).to_contain_text("no CUDA runtime")
    expect(page.get_by_test_id("memory-gpu")).to_have_count(0)  # no GPU here: no GPU line
    assert "CUDA runtime 600" not in estimate.inner_text()
    row = page.get_by_test_id("memory-fit-cpus-0")
    expect(row).to_contain_text("64.0 GiB host RAM, shared by the node's CPU slots")
    expect(row).to_contain_text(re.compile(r"\d+(\.\d)? (KiB|MiB) for 1 rank in the host's RAM"))
    assert "0.00 GiB" not in row.inner_text()
    estimate.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "submit-memory-cpu.png"), full_page=False)

    # the cluster page names the slots' total the host's shared RAM (DeviceOut.memory_shared)
    page.get_by_test_id("nav-cluster").click()
    memory = page.get_by_test_id("device-memory-cpus-0")
    expect(memory).to_contain_text("of the host's 64.0 GiB, shared")
    assert " / 64.0 GiB" not in memory.inner_text()
