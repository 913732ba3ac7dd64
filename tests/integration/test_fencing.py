"""A node we gave up on never trains beside its replacement (#19, #21), on a real cluster.

Node `local` (from `trainboard up`, with the API and scheduler) and worker `n2`, heartbeat
timeout 8 s. Freezing a worker (SIGSTOP) is a node cut off from the API: its ranks go on
(they are other processes) while it says nothing.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.integration.cluster import Cluster, two_node_cluster
from tests.stack import private_redis, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with two_node_cluster(tmp_path_factory.mktemp("fencing")) as running:
        yield running


def ranks_of(cluster: Cluster, job_id: int) -> dict[int, list[psutil.Process]]:
    """Live rank processes of a job of this cluster, by attempt id (read as root): only those
    whose run folder lies under the cluster's own folder, not another test run's job with
    the same id on this machine."""
    found: dict[int, list[psutil.Process]] = {}
    root = f"{cluster.tmp}/"
    for proc in psutil.process_iter():
        try:
            env = proc.environ()
            ours = env.get("TRAINBOARD_RUN_DIR", "").startswith(root)
            if ours and env.get("TRAINBOARD_JOB_ID") == str(job_id) and alive(proc):
                found.setdefault(int(env["TRAINBOARD_ATTEMPT_ID"]), []).append(proc)
        except (psutil.Error, KeyError, ValueError):
            continue
    return found


class AttemptWatch:
    """Samples every 100 ms which attempts of a job have live ranks; remembers overlaps."""

    def __init__(self, cluster: Cluster, job_id: int) -> None:
        self.cluster = cluster
        self.job_id, self.overlaps = job_id, []  # type: tuple[int, list[list[int]]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            alive = sorted(ranks_of(self.cluster, self.job_id))
            if len(alive) > 1:
                self.overlaps.append(alive)

    def stop(self) -> list[list[int]]:
        self._stop.set()
        self._thread.join()
        return self.overlaps


def alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def booked_by(cluster: Cluster, job_id: int) -> list[tuple[str, int]]:
    return [
        (node["name"], device["index"])
        for node in cluster.api("GET", "/api/nodes")["nodes"]
        for device in node["devices"]
        if device["job_id"] == job_id
    ]


def only_on_n2(cluster: Cluster, name: str, **spec: Any) -> int:
    """Submit a 2-device job while `local` is drained, so it runs on n2."""
    cluster.api("POST", "/api/nodes/local/drain")
    job_id = cluster.submit(name, devices=2, **spec)
    cluster.wait_state(job_id, "running")
    cluster.api("POST", "/api/nodes/local/undrain")
    assert cluster.job(job_id)["node"] == "n2"
    return job_id


def assert_one_point_per_step(cluster: Cluster, job_id: int, steps: int) -> None:
    """Every step's loss stored once: no gap, no replayed duplicate. The points reach the
    database through the ingest, which may still be catching up with what the job wrote
    while the API was away when the job's end (reported over HTTP) is already recorded."""

    def loss_steps() -> list[int]:
        found: list[int] = cluster.api("GET", f"/api/jobs/{job_id}/metrics/loss")["step"]
        return found

    wait_for(lambda: steps in loss_steps(), timeout=60, what=f"step {steps}'s loss stored")
    assert loss_steps() == list(range(1, steps + 1))


def test_a_worker_restarted_at_once_ends_its_old_attempts_and_the_job_resumes(
    cluster: Cluster,
) -> None:
    job_id = only_on_n2(cluster, "fast-restart", steps=300, checkpoint={"every_steps": 40})
    wait_for(lambda: cluster.job(job_id)["step"] >= 90, timeout=120, what="two checkpoints")
    old = ranks_of(cluster, job_id)
    cluster.kill_worker("n2")
    restarted = time.monotonic()
    cluster.start_worker("n2")  # what systemd or `restart: unless-stopped` do
    wait_for(
        lambda: cluster.node("n2")["incarnation"] == 2,
        timeout=60,
        what="the restarted worker to register its new incarnation",
    )
    # the old incarnation's attempt ended at once: lost, its devices free, no rank left
    first = wait_for(
        lambda: (
            (a := cluster.api("GET", f"/api/jobs/{job_id}/attempts")[0])["state"] == "lost" and a
        ),
        timeout=10,
        what="the old incarnation's attempt to end",
    )
    assert "restarted (incarnation 2)" in first["exit_reason"]
    wait_for(
        lambda: not any(alive(p) for procs in old.values() for p in procs),
        timeout=10,
        what="the killed worker's ranks to be gone",
    )
    assert cluster.job(job_id)["state"] in ("restarting", "queued", "scheduled", "running")
    assert time.monotonic() - restarted < 60
    done = cluster.wait_state(job_id, "succeeded", "failed", timeout=240)
    assert done["state"] == "succeeded", done["reason"]
    assert done["restarts"] == 0  # a platform fault spends none of the user's restarts
    _, second = cluster.api("GET", f"/api/jobs/{job_id}/attempts")
    assert second["resume_from"] and "/checkpoints/attempt-1/step-" in second["resume_from"]
    assert booked_by(cluster, job_id) == []
    assert_one_point_per_step(cluster, job_id, 300)
    # cancel works on the restarted node
    other = only_on_n2(cluster, "cancel-after-restart", steps=1_000_000)
    cluster.api("POST", f"/api/jobs/{other}/cancel")
    assert cluster.wait_state(other, "cancelled", timeout=60)["state"] == "cancelled"


def test_a_node_cut_off_past_the_timeout_is_killed_on_return_and_its_late_checkpoints_unused(
    cluster: Cluster,
) -> None:
    job_id = only_on_n2(cluster, "partitioned", steps=400, checkpoint={"every_steps": 20})
    wait_for(lambda: cluster.job(job_id)["step"] >= 50, timeout=120, what="a checkpoint")
    worker = cluster.workers["n2"]
    os.kill(worker.pid, signal.SIGSTOP)  # n2 says nothing; its ranks train on
    try:
        lost = wait_for(
            lambda: (
                (a := cluster.api("GET", f"/api/jobs/{job_id}/attempts")[0])["state"] == "lost"
                and a
            ),
            timeout=60,
            what="n2 to be declared lost",
        )
        recorded_at_loss = lost["last_checkpoint"]
        time.sleep(3)  # n2's ranks may write more checkpoints now: they must never count
    finally:
        os.kill(worker.pid, signal.SIGCONT)
    first_id = lost["id"]
    wait_for(
        lambda: first_id not in ranks_of(cluster, job_id),
        timeout=15,
        what="the returning node to kill its fenced ranks",
    )
    done = cluster.wait_state(job_id, "succeeded", "failed", timeout=300)
    assert done["state"] == "succeeded", done["reason"]
    attempts = cluster.api("GET", f"/api/jobs/{job_id}/attempts")
    assert attempts[0]["state"] == "lost"  # its finish report after returning was refused
    assert attempts[0]["last_checkpoint"] == recorded_at_loss
    assert attempts[1]["resume_from"] == recorded_at_loss
    # (a frozen node cannot fence itself: its ranks ran on until it thawed and killed them;
    # a node that is alive but cut off kills them itself before its lease runs out, which
    # the two-host test shows with a real partition)
    assert_one_point_per_step(cluster, job_id, 400)


def test_the_api_gone_for_three_timeouts_never_runs_a_job_twice(cluster: Cluster) -> None:
    job_id = only_on_n2(cluster, "api-outage", steps=300, checkpoint={"every_steps": 30})
    wait_for(lambda: cluster.job(job_id)["step"] >= 40, timeout=120, what="a checkpoint")
    api = next(
        p
        for p in psutil.Process(cluster.stack.process.pid).children(recursive=True)
        if "backend.api_server" in " ".join(p.cmdline())
    )
    watch = AttemptWatch(cluster, job_id)
    api.suspend()  # API and scheduler gone for 3 x the 8 s timeout
    try:
        time.sleep(24)
    finally:
        api.resume()
    done = cluster.wait_state(job_id, "succeeded", "failed", timeout=300)
    assert done["state"] == "succeeded", done["reason"]
    assert watch.stop() == []
    assert all(n["state"] == "up" for n in cluster.api("GET", "/api/nodes")["nodes"])
    assert_one_point_per_step(cluster, job_id, 300)


CRASH_OR_SLEEP = """
import os, sys, time
if os.environ.get("MODE") == "crash":
    sys.exit(3)
time.sleep(600)
"""


@pytest.mark.parametrize("ending", ["crash", "cancel"])
def test_an_ended_gang_frees_an_unclaimed_nodes_devices_at_once_and_it_starts_nothing(
    cluster: Cluster, ending: str
) -> None:
    (cluster.scripts / "gang.py").write_text(CRASH_OR_SLEEP)
    worker = cluster.workers["n2"]
    os.kill(worker.pid, signal.SIGSTOP)  # n2 is slow: it will not claim its part in time
    try:
        spec = {
            "name": f"gang-{ending}",
            "entrypoint": {"script": "gang.py"},
            "parallelism": {"strategy": "data", "devices": 4, "nodes": 2},
            "env": {"MODE": ending},
            "max_restarts": 0,
        }
        job_id = int(cluster.api("POST", "/api/jobs", json=spec)["id"])
        cluster.wait_state(job_id, "running", "failed", timeout=30)
        if ending == "cancel":
            cluster.api("POST", f"/api/jobs/{job_id}/cancel")
        ended = cluster.wait_state(job_id, "failed", "cancelled", timeout=30)
        assert ended["state"] == ("failed" if ending == "crash" else "cancelled")
        gone = time.monotonic()
        wait_for(lambda: booked_by(cluster, job_id) == [], timeout=3, what="devices freed")
        assert time.monotonic() - gone < 3
        (attempt,) = cluster.api("GET", f"/api/jobs/{job_id}/attempts")
        assert attempt["state"] != "running"
    finally:
        os.kill(worker.pid, signal.SIGCONT)
    # the thawed worker finds the stale task waiting for it, loses the claim, starts nothing
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        assert ranks_of(cluster, job_id) == {}
        time.sleep(0.2)
    wait_for(lambda: cluster.node("n2").get("state") == "up", timeout=30, what="n2 back up")


def test_a_worker_on_another_redis_is_misconfigured_and_gets_no_work(
    cluster: Cluster, tmp_path: Path
) -> None:
    with private_redis(tmp_path) as elsewhere:  # not the API's Redis
        started = time.monotonic()
        cluster.start_worker(
            "n3", redis_url=elsewhere, token=cluster.node_token_for("n3"), state="misconfigured"
        )
        assert time.monotonic() - started < 30
        n3 = cluster.node("n3")
        assert "listens on another Redis than the API" in n3["state_reason"]
        cluster.api("POST", "/api/nodes/local/drain")
        try:
            jobs = [cluster.submit(f"not-on-n3-{i}", devices=1, steps=20) for i in range(3)]
            for job_id in jobs:
                assert cluster.wait_state(job_id, "succeeded", timeout=180)["node"] == "n2"
        finally:
            cluster.api("POST", "/api/nodes/local/undrain")
            cluster.kill_worker("n3")
        log = (cluster.tmp / "worker-n3.log").read_text()
        assert "listens on another Redis than the API" in log  # said at start, too
