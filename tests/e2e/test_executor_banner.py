"""Under the Slurm executor every page says when Slurm does not answer (issue #32 item 10):
the board and a running job's page, from the server's words (GET /api/executor), and the
banner goes once Slurm answers again. The view is what the executor publishes
(backend.jobs.cluster.publish_manager); the executor's side, with slurmctld really stopped,
runs in tests/executors/test_slurm_unreachable.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from playwright.sync_api import Page, expect

from backend.config import Settings
from backend.db import utcnow
from backend.jobs.cluster import MANAGER_KEY
from backend.nodes.schemas import ManagerOut
from tests.telemetry.helpers import ADMIN_TOKEN, LiveServer, add_attempt

pytestmark = pytest.mark.browser

DOWN = "Slurm unreachable: squeue did not answer within 30 s"


@pytest.fixture
def under_slurm(tmp_path: Path, sqlite_url: str, redis_url: str) -> Iterator[LiveServer]:
    """The API and the built frontend under the Slurm executor, without its scheduler."""
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=sqlite_url,
        redis_url=redis_url,
        admin_token=ADMIN_TOKEN,
        run_scheduler=False,
        executor="slurm",
    )
    with LiveServer.running(settings) as server:
        yield server


def _publish(served: LiveServer, *, unreachable: str | None) -> None:
    view = ManagerOut(manager="slurm", observed_at=utcnow(), unreachable=unreachable, nodes=[])
    client = redis.Redis.from_url(served.settings.redis_url)
    client.set(served.keys().name(MANAGER_KEY), view.model_dump_json())
    client.close()


def test_every_page_says_slurm_is_unreachable_until_it_answers(
    page: Page, under_slurm: LiveServer
) -> None:
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

    # Slurm answers again: the banner goes at the page's next ask (every 10 s)
    _publish(under_slurm, unreachable=None)
    expect(banner).to_have_count(0, timeout=20_000)
