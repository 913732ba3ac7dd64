"""The production compose file is valid and reserves NVIDIA GPUs for the worker."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
ENV = {
    **os.environ,
    "POSTGRES_PASSWORD": "compose-check",
    "TRAINBOARD_ADMIN_TOKEN": "compose-check-admin-token",
    "TRAINBOARD_NODE_TOKEN": "compose-check-node-token",
}


def _compose(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("docker-compose")
    assert binary, "install docker-compose (apt-get install docker-compose) to validate the file"
    return subprocess.run(
        [binary, "-f", str(ROOT / "docker-compose.yml"), *args],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def test_compose_file_is_valid() -> None:
    result = _compose("config", "-q")
    assert result.returncode == 0, result.stderr


def test_worker_reserves_nvidia_gpus_and_api_binds_loopback() -> None:
    result = _compose("config")
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    assert {"postgres", "redis", "api", "worker"} <= set(services)
    devices = services["worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    for port in services["api"]["ports"]:
        host_ip = port.get("host_ip") if isinstance(port, dict) else str(port).split(":")[0]
        assert host_ip == "127.0.0.1", f"the API is published beyond loopback: {port}"


def test_compose_refuses_to_start_without_secrets() -> None:
    env = {k: v for k, v in ENV.items() if k != "POSTGRES_PASSWORD"}
    binary = shutil.which("docker-compose") or "docker-compose"
    result = subprocess.run(
        [binary, "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode != 0 and "POSTGRES_PASSWORD" in result.stderr
