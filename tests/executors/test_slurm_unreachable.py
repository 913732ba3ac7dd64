"""The Slurm controller away for a while under the Slurm executor (issue #32, item 10)."""

from __future__ import annotations

import subprocess
import time
from typing import Any

from backend.executors.slurm.cli import parse_scontrol_jobs
from tests.executors.conftest import SLURM_TESTS
from tests.executors.slurm_stack import SlurmStack, mlp_job
from tests.slurm_cluster import SlurmCluster
from tests.stack import wait_for

pytestmark = SLURM_TESTS


def test_running_jobs_go_on_while_slurm_is_away_and_nothing_starts_twice(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    with stack.client() as client:

        def job(job_id: int) -> Any:
            return client.get(f"/api/jobs/{job_id}").json()

        running_id = client.post("/api/jobs", json=mlp_job("goes-on", steps=100_000)).json()["id"]
        wait_for(lambda: (job(running_id)["step"] or 0) >= 5, timeout=120, what="training")
        cluster.stop_controller()
        try:
            before = job(running_id)["step"]
            time.sleep(5)
            assert job(running_id)["state"] == "running"
            assert job(running_id)["step"] > before, "the ranks stopped with the controller"
            later_id = client.post("/api/jobs", json=mlp_job("waits-for-slurm")).json()["id"]
            waiting = wait_for(
                lambda: (
                    (j := job(later_id))["wait_reason"]
                    and j["wait_reason"].startswith("Slurm unreachable")
                    and j
                ),
                timeout=60,
                what="the board to say Slurm is unreachable",
            )
            assert waiting["state"] == "queued"  # not submitted blind
        finally:
            cluster.start_controller()
        done = stack.wait_job(client, later_id, "succeeded", "failed", timeout=240)
        assert done["state"] == "succeeded", done["reason"]
        assert job(running_id)["state"] == "running"
        assert client.post(f"/api/jobs/{running_id}/cancel").status_code == 200
        stack.wait_job(client, running_id, "cancelled", timeout=60)
        attempts = {
            job_id: client.get(f"/api/jobs/{job_id}/attempts").json()
            for job_id in (running_id, later_id)
        }
    assert [len(a) for a in attempts.values()] == [1, 1]
    ids = [a[0]["slurm_job_id"] for a in attempts.values()]
    assert all(ids) and len(set(ids)) == 2
    # Slurm knows one job per attempt: no sbatch was sent twice
    shown = subprocess.run(
        ["scontrol", "show", "job", "--oneliner"],
        env=cluster.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    tails = sorted("-".join(j.name.rsplit("-", 2)[1:]) for j in parse_scontrol_jobs(shown))
    assert tails == sorted(f"{job_id}-{a[0]['id']}" for job_id, a in attempts.items())
