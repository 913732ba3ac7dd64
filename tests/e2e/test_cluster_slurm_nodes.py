"""The cluster page under the Slurm executor: Slurm's own nodes, their state and jobs.

The view is what the Slurm executor publishes (backend.jobs.cluster.publish_manager) from
`scontrol show node`, here parsed from scontrol's own text by the executor's functions and
published into the server's Redis; the executor's side runs on a real Slurm in
tests/executors/test_slurm_accounting.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from playwright.sync_api import Page, expect

from backend.db import utcnow
from backend.executors.slurm.cli import parse_scontrol_nodes
from backend.executors.slurm.executor import manager_nodes
from backend.jobs.cluster import MANAGER_KEY
from backend.nodes.schemas import ManagerOut
from tests.e2e.conftest import SCREENSHOTS, serving
from tests.telemetry.helpers import ADMIN_TOKEN, LiveServer, add_attempt

pytestmark = pytest.mark.browser

DOWN = "Slurm unreachable: squeue did not answer within 30 s"

#: two nodes as `scontrol show node --oneliner` prints them (fields trimmed), one drained
SCONTROL = (
    "NodeName=gpu01 Arch=x86_64 CPUAlloc=16 CPUTot=64 Gres=gpu:a100:8(S:0-1) State=MIXED "
    "Partitions=low,high\n"
    "NodeName=gpu02 Arch=x86_64 CPUAlloc=0 CPUTot=64 Gres=gpu:8 State=IDLE+DRAIN "
    "Partitions=low Reason=bad fan [root@2026-11-28T10:00:00]\n"
)


def _publish(served: LiveServer, *, unreachable: str | None = None) -> None:
    """What the Slurm executor publishes every 10 s, even while the controller does not answer."""
    view = ManagerOut(
        manager="slurm",
        observed_at=utcnow(),
        unreachable=unreachable,
        nodes=manager_nodes(parse_scontrol_nodes(SCONTROL), {"gpu01": {7}}),
    )
    client = redis.Redis.from_url(served.settings.redis_url)
    client.set(served.keys().name(MANAGER_KEY), view.model_dump_json())
    client.close()


def test_the_cluster_page_shows_slurms_nodes_with_their_state_and_jobs(
    page: Page, served: LiveServer
) -> None:
    page.goto(served.url + "/")
    page.get_by_test_id("login-token").fill(ADMIN_TOKEN)
    page.get_by_test_id("login-submit").click()
    page.get_by_test_id("nav-cluster").click()
    # the node pool publishes nothing: no Slurm section
    expect(page.get_by_text("No worker nodes have registered yet.")).to_be_visible()
    expect(page.get_by_test_id("manager-nodes")).to_have_count(0)

    _publish(served)
    page.reload()
    section = page.get_by_test_id("manager-nodes")
    expect(section).to_contain_text("Slurm's nodes")
    expect(section).to_contain_text("1 of 2 nodes up · 1 drained · 0 lost")
    up = page.get_by_test_id("manager-node-gpu01").locator("td")
    expect(up).to_have_text(
        ["gpu01", "up MIXED", "16 / 64 CPUs allocated · 8 GPUs", "low, high", "#7", ""]
    )
    drained = page.get_by_test_id("manager-node-gpu02").locator("td")
    expect(drained).to_have_text(
        [
            "gpu02",
            "drained IDLE+DRAIN",
            "0 / 64 CPUs allocated · 8 GPUs",
            "low",
            "none",
            "bad fan [root@2026-11-28T10:00:00]",
        ]
    )
    page.get_by_test_id("manager-jobs-gpu01").get_by_role("link", name="#7").click()
    expect(page).to_have_url(f"{served.url}/jobs/7")

    # while the controller does not answer, the page says so over the nodes as last seen
    _publish(served, unreachable=DOWN)
    page.goto(served.url + "/cluster")
    expect(page.get_by_test_id("manager-warning")).to_have_text(f"{DOWN} (nodes as last seen)")


@pytest.fixture
def under_slurm(tmp_path: Path, sqlite_url: str, redis_url: str) -> Iterator[LiveServer]:
    """The API and the built frontend under the Slurm executor, without its scheduler."""
    with serving(tmp_path, sqlite_url, redis_url, executor="slurm") as server:
        yield server


def test_every_page_says_slurm_is_unreachable_until_it_answers(
    page: Page, under_slurm: LiveServer
) -> None:
    """Issue #32 item 10: the board and a running job's page, in the server's words (GET
    /api/executor); the executor's side, with slurmctld really stopped, runs in
    tests/executors/test_slurm_unreachable.py."""
    job_id, _ = add_attempt(under_slurm.db, owner="admin", state="running")
    _publish(under_slurm, unreachable=DOWN)
    page.goto(under_slurm.url + "/")
    page.get_by_test_id("login-token").fill(ADMIN_TOKEN)
    page.get_by_test_id("login-submit").click()
    banner = page.get_by_test_id("executor-warning")
    expect(banner).to_have_text(
        f"{DOWN} — running jobs go on; nothing new starts until it answers; "
        "job states are as last seen."
    )
    page.goto(f"{under_slurm.url}/jobs/{job_id}")
    expect(page.get_by_test_id("job-state")).to_be_visible()
    expect(banner).to_contain_text(DOWN)
    # the banner fits the window: nothing wider than 1280 px
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    page.screenshot(path=str(SCREENSHOTS / "slurm-unreachable.png"))

    # Slurm answers again: the banner goes at the page's next ask (every 10 s)
    _publish(under_slurm, unreachable=None)
    expect(banner).to_have_count(0)
