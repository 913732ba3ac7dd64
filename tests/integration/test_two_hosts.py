"""Multi-node jobs across two hosts (network namespaces): derived addresses, checks, faults.

Host A runs Redis, the API and node `local` (`trainboard up`); host B runs `trainboard
worker`s told only the API URL, Redis URL, token, name and data dir (#23).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.integration.netns import set_link
from tests.integration.two_host_cluster import TwoHosts, two_host_cluster
from tests.stack import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoHosts]:
    with two_host_cluster(tmp_path_factory.mktemp("two-hosts")) as running:
        running.start_worker("n2", running.b, running.data_dir)
        yield running


def _points_once_each(hosts: TwoHosts, job_id: int) -> dict[str, set[int]]:
    """Ranks with points per metric name; fails on any (step, rank, name) twice."""
    twice = hosts.sql(
        "SELECT m.step, m.rank, m.name, count(*) FROM metric_points m JOIN attempts a "
        "ON a.id = m.attempt_id WHERE a.job_id = :job GROUP BY m.step, m.rank, m.name "
        "HAVING count(*) > 1",
        job=job_id,
    )
    assert twice == []
    rows = hosts.sql(
        "SELECT m.name, m.rank, count(*) FROM metric_points m JOIN attempts a "
        "ON a.id = m.attempt_id WHERE a.job_id = :job GROUP BY m.name, m.rank",
        job=job_id,
    )
    ranks: dict[str, set[int]] = {}
    for name, rank, _ in rows:
        ranks.setdefault(name, set()).add(rank)
    return ranks


def test_each_node_advertises_the_address_of_its_route_to_the_api(hosts: TwoHosts) -> None:
    local, n2 = hosts.node("local"), hosts.node("n2")
    assert (local["address"], local["interface"]) == (hosts.a.address, hosts.a.interface)
    assert (n2["address"], n2["interface"]) == (hosts.b.address, hosts.b.interface)
    assert n2["state"] == "up" and local["storage"] == n2["storage"]  # one shared run root
    said = f"node n2 advertises {hosts.b.address} on interface {hosts.b.interface}"
    assert said in hosts.log("worker-n2")


def test_a_four_device_data_parallel_job_across_the_hosts(hosts: TwoHosts) -> None:
    job_id = hosts.submit("dp-2x2", steps=20, strategy="data", devices=4, nodes=2)
    job = hosts.wait_state(job_id, "succeeded", "failed", "restarting")
    assert job["state"] == "succeeded", job["reason"]
    assert sorted(p["node"] for p in job["placement"]) == ["local", "n2"]
    ranks = _points_once_each(hosts, job_id)
    assert ranks["grad_norm"] == {0, 1, 2, 3}
    steps = hosts.sql(
        "SELECT count(DISTINCT m.step) FROM metric_points m JOIN attempts a "
        "ON a.id = m.attempt_id WHERE a.job_id = :job AND m.name = 'grad_norm'",
        job=job_id,
    )
    assert steps[0][0] == 2  # steps 10 and 20: without grad_clip, every 10 steps


def test_a_two_stage_pipeline_across_the_hosts(hosts: TwoHosts) -> None:
    job_id = hosts.submit("pp-2", steps=20, strategy="model", devices=2, nodes=2, microbatches=2)
    job = hosts.wait_state(job_id, "succeeded", "failed", "restarting")
    assert job["state"] == "succeeded", job["reason"]
    assert sorted(p["node"] for p in job["placement"]) == ["local", "n2"]
    assert "loss" in _points_once_each(hosts, job_id)


@pytest.mark.timeout(900)  # 40 rank starts on 2 shared cores: 3.5 to 6 minutes here
def test_twenty_two_node_starts_in_a_row_none_refused(hosts: TwoHosts) -> None:
    jobs = [hosts.submit(f"pair-{i}", steps=2, devices=2, nodes=2) for i in range(20)]
    for job_id in jobs:
        job = hosts.wait_state(job_id, "succeeded", "failed", "restarting", timeout=600)
        assert job["state"] == "succeeded", (job_id, job["reason"])
    attempts = hosts.sql(
        "SELECT job_id, count(*) FROM attempts WHERE job_id >= :first GROUP BY job_id",
        first=jobs[0],
    )
    assert sorted(count for _, count in attempts) == [1] * 20
    for log in ("up", "worker-n2"):
        assert "claim refused" not in hosts.log(log)


def test_an_unreachable_advertised_address_is_refused_or_named(hosts: TwoHosts) -> None:
    started = time.monotonic()
    hosts.start_worker("n3", hosts.b, hosts.data_dir, TRAINBOARD_ADDRESS="127.0.0.1")
    n3 = wait_for(lambda: (n := hosts.node("n3"))["state"] == "misconfigured" and n, timeout=60,
                  what="n3 misconfigured")  # fmt: skip
    assert "127.0.0.1 is loopback" in n3["state_reason"] and time.monotonic() - started < 60
    hosts.stop("worker-n3")
    # a second address of B's that A has no route to: n4 leads the gang (1 slot, so it is
    # placed first) and the others cannot reach its store
    other = hosts.b.address.replace("10.231.", "10.232.")
    add = ["ip", "-n", hosts.b.namespace, "addr", "add", f"{other}/24", "dev", hosts.b.interface]
    subprocess.run(add, check=True, timeout=30)
    hosts.start_worker(
        "n4", hosts.b, hosts.data_dir, TRAINBOARD_ADDRESS=other, TRAINBOARD_CPU_SLOTS="1"
    )
    assert hosts.node("n4")["interface"] == hosts.b.interface
    hosts.api("POST", "/api/nodes/n2/drain")
    try:
        job_id = hosts.submit("unreachable", steps=5, devices=2, nodes=2, rendezvous_timeout_s=10)
        submitted = time.monotonic()
        job = hosts.wait_state(job_id, "restarting", "failed", "succeeded", timeout=60)
        assert time.monotonic() - submitted < 60
        assert job["state"] == "restarting", job["reason"]
        assert "rendezvous failed" in job["reason"] and other in job["reason"], job["reason"]
        assert "not counted: a platform fault" in _last_event(hosts, job_id)
        hosts.api("POST", f"/api/jobs/{job_id}/cancel")
        hosts.wait_state(job_id, "cancelled", timeout=60)
    finally:
        hosts.stop("worker-n4")
        hosts.api("POST", "/api/nodes/n2/undrain")
    wait_for(lambda: hosts.node("n4")["state"] == "lost", timeout=60, what="n4 gone")


def _last_event(hosts: TwoHosts, job_id: int) -> str:
    rows = hosts.sql(
        "SELECT message FROM job_events WHERE job_id = :job ORDER BY id DESC LIMIT 1", job=job_id
    )
    return str(rows[0][0]) if rows else ""


def test_hosts_without_a_shared_run_root_get_no_multi_node_job(hosts: TwoHosts) -> None:
    hosts.start_worker("n5", hosts.b, Path(str(hosts.data_dir) + "-b"))
    assert hosts.node("n5")["storage"] != hosts.node("local")["storage"]
    others = [n["name"] for n in hosts.api("GET", "/api/nodes")["nodes"]]
    others = [name for name in others if name not in ("local", "n5")]
    for name in others:  # only local and n5 may take work: they share no run root
        hosts.api("POST", f"/api/nodes/{name}/drain")
    try:
        job_id = hosts.submit("unshared", steps=10, devices=2, nodes=2)
        reason = wait_for(lambda: hosts.job(job_id)["wait_reason"], timeout=30, what="a reason")
        assert "sharing one checkpoint location" in reason, reason
        time.sleep(5)
        assert hosts.job(job_id)["state"] == "queued"  # never placed on local + n5
    finally:
        hosts.stop("worker-n5")
        for name in others:
            hosts.api("POST", f"/api/nodes/{name}/undrain")
    job = hosts.wait_state(job_id, "succeeded", "failed", "restarting")
    assert job["state"] == "succeeded", job["reason"]
    assert hosts.sql("SELECT count(*) FROM attempt_slices WHERE node_name = 'n5'") == [(0,)]


def _ranks_of(job_id: int, group_rank: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            env = proc.environ() if "workers.rank.engine" in " ".join(proc.info["cmdline"]) else {}
        except (psutil.Error, TypeError):
            continue
        if env.get("TRAINBOARD_JOB_ID") == str(job_id) and env.get("GROUP_RANK") == group_rank:
            found.append(proc)
    return found


def test_peers_of_a_partitioned_host_stop_within_3_s_of_the_loss(hosts: TwoHosts) -> None:
    job_id = hosts.submit("partitioned", steps=1_000_000, devices=2, nodes=2)
    wait_for(lambda: hosts.job(job_id)["step"] >= 5, timeout=120, what="training across hosts")
    assert _ranks_of(job_id, "0")
    set_link(hosts.b, up=False)
    try:
        wait_for(
            lambda: hosts.job(job_id)["state"] in ("restarting", "queued", "failed"),
            timeout=60,
            what="the attempt to end with n2 lost",
        )
        lost_at = time.monotonic()
        wait_for(lambda: not _ranks_of(job_id, "0"), timeout=10, what="local's ranks to stop")
        assert time.monotonic() - lost_at < 3
    finally:
        set_link(hosts.b, up=True)
        hosts.api("POST", f"/api/jobs/{job_id}/cancel")
