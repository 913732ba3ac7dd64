"""Recovery on a real two-node cluster: a Redis flush, a worker killed with SIGKILL."""

from __future__ import annotations

from collections.abc import Iterator

import psutil
import pytest
import redis

from tests.integration.cluster import Cluster, rank_processes, two_node_cluster
from tests.stack import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with two_node_cluster(tmp_path_factory.mktemp("recovery")) as running:
        yield running


def test_redis_flushed_while_jobs_queue_and_run_every_job_still_finishes(cluster: Cluster) -> None:
    jobs = [cluster.submit(f"flush-{i}", devices=2, steps=150) for i in range(3)]
    wait_for(
        lambda: sum(cluster.job(j)["state"] == "running" for j in jobs) >= 2,
        timeout=120,
        what="two jobs running",
    )
    redis.Redis.from_url(cluster.stack.redis_url).flushdb()
    for job_id in jobs:
        assert (
            cluster.wait_state(job_id, "succeeded", "failed", timeout=240)["state"] == "succeeded"
        )


def test_a_killed_worker_node_restarts_its_job_elsewhere_from_the_newest_checkpoint(
    cluster: Cluster,
) -> None:
    cluster.api("POST", "/api/nodes/local/drain")
    job_id = cluster.submit("survivor", devices=2, steps=400, checkpoint={"every_steps": 50})
    cluster.wait_state(job_id, "running")
    cluster.api("POST", "/api/nodes/local/undrain")
    assert cluster.job(job_id)["node"] == "n2"
    wait_for(
        lambda: cluster.job(job_id)["step"] >= 120,
        timeout=120,
        what="training past two checkpoints",
    )
    ranks = rank_processes(job_id, cluster.stack.data_dir)
    cluster.kill_worker("n2")
    done = cluster.wait_state(job_id, "succeeded", "failed", timeout=240)
    assert done["state"] == "succeeded", done["reason"]
    wait_for(
        lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in ranks),
        timeout=10,
        what="the killed node's ranks to be gone",
    )
    first, second = cluster.api("GET", f"/api/jobs/{job_id}/attempts")
    assert (first["state"], first["node"]) == ("lost", "n2")
    assert (second["state"], second["node"]) == ("succeeded", "local")
    resumed_at = int(second["resume_from"].rsplit("-", 1)[1])
    last_lost_step = cluster.sql(
        "SELECT max(step) FROM metric_points WHERE attempt_id = :a AND name = 'loss'", a=first["id"]
    )[0][0]
    assert 0 <= last_lost_step - resumed_at <= 50 + 5  # at most one checkpoint interval recomputed
    curve = cluster.api("GET", f"/api/jobs/{job_id}/metrics/loss")
    assert curve["step"] == list(range(1, 401))
    duplicates = cluster.sql(
        "SELECT count(*) FROM metric_points m JOIN attempts a ON a.id = m.attempt_id "
        "WHERE a.job_id = :j GROUP BY m.attempt_id, m.step, m.rank, m.name HAVING count(*) > 1",
        j=job_id,
    )
    assert duplicates == []
    cluster.start_worker("n2")


CRASHING_SCRIPT = """
import os, torch.distributed as dist
dist.init_process_group("gloo")
for step in range(1, 100):
    print(f"step {step}: loss {1.0 / step:.4f}", flush=True)
    if step == 3:
        raise RuntimeError("boom at step 3")
"""


def test_a_crash_looping_job_fails_after_max_restarts_plus_one_attempts(cluster: Cluster) -> None:
    (cluster.scripts / "crash.py").write_text(CRASHING_SCRIPT)
    spec = {
        "name": "crash-loop",
        "entrypoint": {"script": "crash.py"},
        "parallelism": {"strategy": "data", "devices": 2},
        "max_restarts": 2,
    }
    job_id = int(cluster.api("POST", "/api/jobs", json=spec)["id"])
    job = cluster.wait_state(job_id, "failed", "succeeded", timeout=240)
    assert job["state"] == "failed" and "boom at step 3" in job["reason"]
    attempts = cluster.api("GET", f"/api/jobs/{job_id}/attempts")
    assert [a["state"] for a in attempts] == ["failed", "failed", "failed"]
    assert job["restarts"] == 2
    kinds = [e["kind"] for e in cluster.api("GET", f"/api/jobs/{job_id}/events")]
    assert kinds.count("restarting") == 2 and kinds[-1] == "failed"
