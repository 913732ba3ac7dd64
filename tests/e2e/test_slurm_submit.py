"""Submitting from the browser and from the CLI to a Slurm-backed Trainboard (#32 item 1).

`trainboard up --executor slurm` on a real one-host Slurm (2 CPUs): while another job holds
both CPUs, a job submitted from the browser's form and one from `trainboard submit` each
become a pending Slurm job; the job page and `trainboard ls` show Slurm's pending reason
with the Slurm job id, `trainboard attempts` the Slurm job id, and both run once the CPUs
are free (the job page's attempts table then shows the Slurm job id too).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from backend.executors.slurm.states import wait_reason
from tests.e2e.helpers import log_in
from tests.executors.conftest import SLURM_TESTS, cluster_of
from tests.executors.slurm_stack import SlurmStack, mlp_job, slurm_stack
from tests.job_users import open_scratch
from tests.slurm_cluster import SlurmCluster
from tests.stack import wait_for

pytestmark = [pytest.mark.browser, *SLURM_TESTS]

cluster = cluster_of("slurm-submit", cpus=2, kill_wait=2)


@pytest.fixture(scope="module")
def stack(cluster: SlurmCluster) -> Iterator[SlurmStack]:
    # outside pytest's tmp, which a concurrent pytest session makes 0700 (executors' conftest)
    with open_scratch("tb-slurm-submit-") as scratch, slurm_stack(scratch, cluster) as running:
        yield running


def _held_by_slurm(stack: SlurmStack, cluster: SlurmCluster, client: Any, job_id: int) -> str:
    """The job's Slurm job id once the API shows Slurm's pending reason for it, in words,
    as squeue gives it at that moment."""

    def shown() -> str | None:
        job = client.get(f"/api/jobs/{job_id}").json()
        slurm_id = stack.attempts(client, job_id)[0]["slurm_job_id"] if job["attempt"] else None
        queued = cluster.cli.queue("tb-").get(slurm_id or "")
        if queued is None or queued.state != "PENDING" or job["state"] != "scheduled":
            return None
        said = f"Slurm job {slurm_id}: {wait_reason(queued.reason)}"
        return slurm_id if job["wait_reason"] == said else None

    return wait_for(shown, timeout=60, what=f"job {job_id} to show Slurm's pending reason")


def test_jobs_from_the_browser_and_the_cli_wait_with_slurms_reason_then_run(
    page: Page, stack: SlurmStack, cluster: SlurmCluster, tmp_path: Path
) -> None:
    with stack.client() as client:
        holder_id = stack.hold_both(client, step=3)

        # from the browser's form
        log_in(page, stack)
        page.get_by_test_id("nav-submit").click()
        page.get_by_test_id("submit-name").fill("from-the-browser")
        page.get_by_test_id("submit-template").select_option("mlp")
        page.get_by_test_id("submit-devices").fill("1")
        page.get_by_test_id("hp-steps").fill("30")
        page.get_by_test_id("submit-button").click()
        expect(page).to_have_url(re.compile(r".*/jobs/\d+$"))
        browser_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
        browser_slurm = _held_by_slurm(stack, cluster, client, browser_id)
        reason = page.get_by_test_id("job-wait-reason")
        expect(reason).to_have_text(re.compile(rf"^Slurm job {browser_slurm}: waiting .*\(\w+\)$"))
        expect(page.get_by_test_id("job-state")).to_have_attribute("data-state", "scheduled")
        # the attempts table names the Slurm job while it is pending: the reason naming it
        # changed after the table's first read, which predates the id (stored at the
        # executor's next pass), and a changed reason reads the table again
        expect(page.get_by_test_id("attempt-placement-1")).to_contain_text(
            f"(Slurm job {browser_slurm})"
        )

        # from the CLI
        spec_file = tmp_path / "spec.json"
        spec_file.write_text(json.dumps(mlp_job("from-the-cli", steps=30)))
        submitted = stack.cli("submit", str(spec_file))
        assert submitted.returncode == 0, submitted.stderr
        found = re.match(r"job (\d+) ", submitted.stdout)
        assert found is not None, submitted.stdout
        cli_id = int(found.group(1))
        cli_slurm = _held_by_slurm(stack, cluster, client, cli_id)
        listed = stack.cli("ls")
        assert listed.returncode == 0, listed.stderr
        line = next(
            row for row in listed.stdout.splitlines() if row.endswith("]") and "from-the-cli" in row
        )
        assert re.search(rf"scheduled .*\[Slurm job {cli_slurm}: waiting .*\(\w+\)\]$", line), line
        shown = stack.cli("attempts", str(cli_id))
        assert f"(Slurm job {cli_slurm})" in shown.stdout, shown.stdout

        # the CPUs freed, both run in Slurm to the end
        cancelled = stack.cli("cancel", str(holder_id))
        assert cancelled.returncode == 0, cancelled.stderr
        expect(page.get_by_test_id("job-state")).to_have_attribute(
            "data-state", "succeeded", timeout=240_000
        )
        expect(reason).to_have_count(0)
        expect(page.get_by_test_id("attempt-placement-1")).to_contain_text(
            f"(Slurm job {browser_slurm})"
        )
        done = stack.wait_job(client, cli_id, "succeeded", "failed", timeout=240)
        assert done["state"] == "succeeded", done["reason"]
        attempts = {job: stack.attempts(client, job) for job in (browser_id, cli_id)}
    assert [len(a) for a in attempts.values()] == [1, 1], [
        (a["number"], a["state"], a["slurm_job_id"], a["exit_reason"])
        for rows in attempts.values()
        for a in rows
    ]
    assert [a[0]["slurm_job_id"] for a in attempts.values()] == [browser_slurm, cli_slurm]
    for slurm_id in (browser_slurm, cli_slurm):
        record = wait_for(
            lambda s=slurm_id: (j := cluster.cli.job(s)) and j.state == "COMPLETED" and j,
            timeout=30,
            what=f"Slurm job {slurm_id} to complete",
        )
        assert record.exit_code == 0, record
