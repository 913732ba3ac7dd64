"""A two-node cluster on one machine: `trainboard up` (node `local`) plus `trainboard worker` n2."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from backend.auth.service import ensure_admin, issue_token
from backend.db import Database
from tests.integration.job_api import JobApi
from tests.stack import RunningStack, trainboard_up, wait_for

#: short enough that recovery tests finish quickly, long enough for a loaded 2-core machine
CLUSTER_ENV = {"TRAINBOARD_HEARTBEAT_TIMEOUT": "8", "TRAINBOARD_CLAIM_TIMEOUT": "12"}


@dataclass
class Cluster(JobApi):
    stack: RunningStack
    tmp: Path
    node_token: str
    scripts: Path
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start_worker(
        self,
        name: str,
        slots: int = 2,
        *,
        redis_url: str | None = None,
        token: str | None = None,
        state: str = "up",
    ) -> None:
        """Start `trainboard worker` as node `name` on the stack's data dir (shared storage)."""
        env = {
            **os.environ,
            "TRAINBOARD_API_URL": self.stack.url,
            "TRAINBOARD_REDIS_URL": redis_url or self.stack.redis_url,
            "TRAINBOARD_NODE_TOKEN": token or self.node_token,
            "TRAINBOARD_DATA_DIR": str(self.stack.data_dir),
            "TRAINBOARD_STOP_GRACE_SECONDS": "5",
            "TRAINBOARD_SCRIPT_ROOTS": str(self.scripts),
        }
        log = (self.tmp / f"worker-{name}.log").open("ab")
        self.workers[name] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "backend.cli",
                "worker",
                "--node-name",
                name,
                "--cpu-slots",
                str(slots),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_for(
            lambda: self.node(name).get("state") == state,
            timeout=90,
            what=f"node {name} to register ({state})",
        )

    def node_token_for(self, name: str) -> str:
        """A node token bound to `name`, minted straight in the database."""
        database = Database(self.stack.database_url)
        with database.session() as session:
            _, token = issue_token(
                session, user=ensure_admin(session), scopes="node", name=name, node=name
            )
        database.dispose()
        return token

    def kill_worker(self, name: str) -> None:
        """SIGKILL a worker process, as a crashed machine would leave it."""
        process = self.workers.pop(name)
        process.kill()
        process.wait()

    def stop_workers(self) -> None:
        for process in self.workers.values():
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        for process in self.workers.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        self.workers.clear()

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        with self.stack.client() as client:
            response = client.request(method, path, **kwargs)
        assert response.status_code < 400, (
            f"{method} {path}: {response.status_code} {response.text}"
        )
        return response.json() if response.content else None

    @property
    def database_url(self) -> str:
        return self.stack.database_url

    def submit(self, name: str, *, devices: int = 1, steps: int = 1_000_000, **extra: Any) -> int:
        spec = {
            "name": name,
            "template": "mlp",
            "parallelism": {"strategy": "data", "devices": devices, **extra.pop("parallelism", {})},
            "hyperparameters": {"steps": steps, "batch_size": 16},
            **extra,
        }
        return int(self.api("POST", "/api/jobs", json=spec)["id"])


def rank_processes(job_id: int, data_dir: Path) -> list[psutil.Process]:
    """The live engine rank processes of a job whose runs lie under data_dir (one test's
    stack: another test run's job with the same id on this machine is not counted)."""
    ranks, root = [], f"{data_dir}/"
    for proc in psutil.process_iter(["cmdline"]):
        try:
            env = proc.environ()
            if (
                "workers.rank.engine" in " ".join(proc.info["cmdline"] or ())
                and env.get("TRAINBOARD_JOB_ID") == str(job_id)
                and env.get("TRAINBOARD_RUN_DIR", "").startswith(root)
            ):
                ranks.append(proc)
        except psutil.Error:
            continue
    return ranks


@contextlib.contextmanager
def two_node_cluster(tmp: Path) -> Iterator[Cluster]:
    """Node `local` (2 CPU slots, from `trainboard up`) and node `n2` (2 CPU slots)."""
    scripts = tmp / "scripts"
    scripts.mkdir()
    env = {**CLUSTER_ENV, "TRAINBOARD_SCRIPT_ROOTS": str(scripts)}
    with trainboard_up(tmp, cpu_slots=2, extra_env=env) as stack:
        database = Database(stack.database_url)
        with database.session() as session:
            admin = ensure_admin(session)
            _, token = issue_token(session, user=admin, scopes="node", name="n2", node="n2")
        database.dispose()
        cluster = Cluster(stack, tmp, token, scripts)
        try:
            cluster.start_worker("n2")
            yield cluster
        finally:
            cluster.stop_workers()
