"""Scheduling and recovery on a real two-node cluster: gangs, multi-node, lost nodes, flushes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster, rank_processes, two_node_cluster
from tests.stack import wait_for
from workers.contract.keys import Keys
from workers.contract.protocol import RUN_ATTEMPT_TASK, AttemptOrder
from workers.contract.spec import JobSpec
from workers.node.celery_app import direct_queue, make_celery

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with two_node_cluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


def _cancel_all(cluster: Cluster, job_ids: list[int]) -> None:
    for job_id in job_ids:
        if cluster.job(job_id)["state"] in ("queued", "scheduled", "running"):
            cluster.api("POST", f"/api/jobs/{job_id}/cancel")
    for job_id in job_ids:
        cluster.wait_state(job_id, "cancelled", "succeeded", "failed", timeout=60)


def test_four_one_slot_jobs_run_at_once_and_a_two_slot_job_waits_for_a_whole_gang(
    cluster: Cluster,
) -> None:
    singles = [cluster.submit(f"single-{i}") for i in range(4)]
    for job_id in singles:
        cluster.wait_state(job_id, "running")
    nodes = sorted(cluster.job(j)["node"] for j in singles)
    assert nodes == ["local", "local", "n2", "n2"]
    wide = cluster.submit("wide", devices=2)
    waiting = wait_for(lambda: cluster.job(wide)["wait_reason"], timeout=30, what="a wait reason")
    assert waiting == "waiting for 2 free devices"
    on_local = [j for j in singles if cluster.job(j)["node"] == "local"]
    cluster.api("POST", f"/api/jobs/{on_local[0]}/cancel")
    cluster.wait_state(on_local[0], "cancelled")
    assert cluster.job(wide)["state"] == "queued"  # one free device is not a gang of two
    cluster.api("POST", f"/api/jobs/{on_local[1]}/cancel")
    started = cluster.wait_state(wide, "running", timeout=60)
    assert started["node"] == "local" and len(started["devices"]) == 2
    _cancel_all(cluster, [*singles, wide])


def test_a_two_node_gang_all_reduces_across_both_nodes(cluster: Cluster) -> None:
    job_id = cluster.submit("two-nodes", devices=4, steps=40, parallelism={"nodes": 2})
    job = cluster.wait_state(job_id, "succeeded", "failed", timeout=180)
    assert job["state"] == "succeeded", job["reason"]
    assert sorted(p["node"] for p in job["placement"]) == ["local", "n2"]
    rows = cluster.sql(
        "SELECT m.step, m.rank, m.value FROM metric_points m "
        "JOIN attempts a ON a.id = m.attempt_id WHERE a.job_id = :job AND m.name = 'grad_norm'",
        job=job_id,
    )
    by_step: dict[int, dict[int, float]] = {}
    for step, rank, value in rows:
        by_step.setdefault(step, {})[rank] = value
    # without grad_clip the norm is taken every 10 steps
    assert sorted(by_step) == [10, 20, 30, 40]
    assert all(set(ranks) == {0, 1, 2, 3} for ranks in by_step.values())
    for ranks in by_step.values():  # gradients are all-reduced over all 4 ranks on 2 nodes
        assert max(ranks.values()) - min(ranks.values()) <= 1e-6 * max(1.0, max(ranks.values()))


def test_a_task_delivered_twice_trains_once(cluster: Cluster) -> None:
    job_id = cluster.submit("twice", devices=2)
    cluster.wait_state(job_id, "running")
    attempt = cluster.api("GET", f"/api/jobs/{job_id}/attempts")[-1]
    job = cluster.job(job_id)
    order = AttemptOrder(
        attempt_id=attempt["id"],
        job_id=job_id,
        number=attempt["number"],
        node=attempt["node"],
        devices=attempt["devices"],
        spec=JobSpec.model_validate(job["spec"]),
        deployment=cluster.sql("SELECT id FROM deployment")[0][0],
    )
    make_celery(cluster.stack.redis_url).send_task(
        RUN_ATTEMPT_TASK,
        args=[order.model_dump(mode="json")],
        queue=direct_queue(Keys(order.deployment).node_queue(order.node)),
    )
    wait_for(
        lambda: "claim refused" in _worker_log(cluster, order.node),
        timeout=30,
        what="the duplicate",
    )
    assert len(rank_processes(job_id, cluster.stack.data_dir)) == 2
    assert len(cluster.api("GET", f"/api/jobs/{job_id}/attempts")) == 1
    _cancel_all(cluster, [job_id])


def test_cancel_then_resume_continues_from_the_final_checkpoint(cluster: Cluster) -> None:
    job_id = cluster.submit("resumable", devices=2, checkpoint={"every_steps": 1000})
    wait_for(lambda: cluster.job(job_id)["step"] >= 30, timeout=120, what="some training")
    cluster.api("POST", f"/api/jobs/{job_id}/cancel")
    stopped = cluster.wait_state(job_id, "cancelled", timeout=30)
    first = cluster.api("GET", f"/api/jobs/{job_id}/attempts")[0]
    assert first["last_checkpoint"], "cancel left no final checkpoint"
    saved = int(first["last_checkpoint"].rsplit("-", 1)[1])
    assert saved >= 30 and saved >= stopped["step"] - 1
    cluster.api("POST", f"/api/jobs/{job_id}/resume")
    wait_for(lambda: cluster.job(job_id)["step"] > saved + 5, timeout=120, what="the resumed run")
    second = cluster.api("GET", f"/api/jobs/{job_id}/attempts")[1]
    assert second["resume_from"] == first["last_checkpoint"]
    resumed_steps = cluster.sql(
        "SELECT min(step) FROM metric_points WHERE attempt_id = :a AND name = 'loss'",
        a=second["id"],
    )
    assert resumed_steps[0][0] == saved + 1
    _cancel_all(cluster, [job_id])


def _worker_log(cluster: Cluster, node: str) -> str:
    path = cluster.tmp / f"worker-{node}.log" if node != "local" else cluster.stack.log_path
    return Path(path).read_text(errors="replace")
