"""The production compose file and image: valid, healthy, restarting, private, least privilege."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from backend.telemetry.live.direct import WS_PROTOCOL

ROOT = Path(__file__).resolve().parent.parent
ENV = {
    **os.environ,
    "POSTGRES_PASSWORD": "compose-postgres-password",
    "TRAINBOARD_REDIS_PASSWORD": "compose-check-redis-password",
    "TRAINBOARD_REDIS_WORKER_PASSWORD": "compose-check-redis-worker-password",
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


@functools.cache
def _config(*profiles: str) -> str:
    """`docker-compose config` with these profiles (a run takes a while: once per set)."""
    flags = [arg for profile in profiles for arg in ("--profile", profile)]
    result = _compose(*flags, "config")
    assert result.returncode == 0, result.stderr
    return result.stdout


def _services(*profiles: str) -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load(_config(*profiles))["services"]
    return services


def test_compose_file_is_valid() -> None:
    result = _compose("config", "-q")
    assert result.returncode == 0, result.stderr


def test_worker_reserves_nvidia_gpus_and_api_binds_loopback() -> None:
    services = _services()
    assert {"postgres", "redis", "api", "worker"} <= set(services)
    devices = services["worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    for port in services["api"]["ports"]:
        host_ip = port.get("host_ip") if isinstance(port, dict) else str(port).split(":")[0]
        assert host_ip == "127.0.0.1", f"the API is published beyond loopback: {port}"


def test_compose_refuses_to_start_without_secrets() -> None:
    binary = shutil.which("docker-compose") or "docker-compose"
    for secret in (
        "POSTGRES_PASSWORD",
        "TRAINBOARD_REDIS_PASSWORD",
        "TRAINBOARD_REDIS_WORKER_PASSWORD",
    ):
        env = {k: v for k, v in ENV.items() if k != secret}
        result = subprocess.run(
            [binary, "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert result.returncode != 0 and secret in result.stderr, secret


def test_every_service_has_a_healthcheck_and_a_restart_policy() -> None:
    services = _services("tls")
    assert {"postgres", "redis", "api", "worker", "proxy"} == set(services)
    for name, service in services.items():
        check = service.get("healthcheck", {})
        assert check.get("test") and not check.get("disable"), f"{name} has no healthcheck"
        assert service.get("restart") in ("always", "unless-stopped"), name
    for name in ("api", "worker", "proxy"):
        for dependency in services[name]["depends_on"].values():
            assert dependency["condition"] == "service_healthy", name


def test_redis_has_acl_users_whose_passwords_only_the_environment_supplies() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    for secret in ("TRAINBOARD_REDIS_PASSWORD", "TRAINBOARD_REDIS_WORKER_PASSWORD"):
        uses = re.findall(rf"\$\{{{secret}([^}}]*)\}}", text)
        assert uses and all(use.startswith(":?") for use in uses), uses  # no default password
    services = _services()
    api_password = ENV["TRAINBOARD_REDIS_PASSWORD"]
    worker_password = ENV["TRAINBOARD_REDIS_WORKER_PASSWORD"]
    redis = services["redis"]
    command = " ".join(redis["command"])
    assert "--aclfile" in command
    assert api_password not in command and worker_password not in command  # not on argv
    assert "REDISCLI_AUTH" in " ".join(redis["healthcheck"]["test"])
    assert "ports" not in redis and "ports" not in services["postgres"]
    urls = {
        name: services[name]["environment"]["TRAINBOARD_REDIS_URL"] for name in ("api", "worker")
    }
    assert urls["api"] == f"redis://trainboard-api:{api_password}@redis:6379/0"
    assert urls["worker"] == f"redis://trainboard-worker:{worker_password}@redis:6379/0"
    assert api_password not in str(services["worker"])  # a worker host holds its own user only


def test_the_redis_command_renders_an_acl_file_redis_loads(tmp_path: Path) -> None:
    """The compose command's own rendering (sed over deploy/redis-users.acl), run here."""
    import redis as redis_client

    from tests.stack import tcp_redis

    script = _services()["redis"]["command"][2]
    render = script.split(" && exec ")[0].replace("$$", "$")
    render = render.replace("/etc/redis/users.acl.in", str(ROOT / "deploy" / "redis-users.acl"))
    render = render.replace("/run/redis/", f"{tmp_path}/")
    passwords = {"API_PASSWORD": "api-0123456789abcdef", "WORKER_PASSWORD": "worker-0123456789"}
    subprocess.run(["sh", "-c", render], env={**os.environ, **passwords}, check=True)
    acl_file = tmp_path / "users.acl"
    assert acl_file.stat().st_mode & 0o777 == 0o600
    api = f"redis://trainboard-api:{passwords['API_PASSWORD']}@127.0.0.1:{{port}}/0"
    with tcp_redis(tmp_path, api, "--aclfile", str(acl_file)) as port:
        worker = f"redis://trainboard-worker:{passwords['WORKER_PASSWORD']}@127.0.0.1:{port}/0"
        with redis_client.Redis.from_url(worker) as client:
            assert client.ping()
        anonymous = redis_client.Redis.from_url(f"redis://127.0.0.1:{port}/0")
        with anonymous, pytest.raises(redis_client.AuthenticationError):
            anonymous.ping()


def test_workers_get_no_database_url() -> None:
    worker = _services()["worker"]["environment"]
    assert "TRAINBOARD_DATABASE_URL" not in worker
    assert not [k for k, v in worker.items() if ENV["POSTGRES_PASSWORD"] in str(v)]
    assert "TRAINBOARD_DATABASE_URL" in _services()["api"]["environment"]


def test_the_api_runs_as_the_service_user_with_the_direct_websocket_protocol() -> None:
    services = _services()
    api, worker = services["api"], services["worker"]
    assert api["user"] == "trainboard"
    assert "no-new-privileges:true" in api["security_opt"]
    command = api["command"]
    assert command[command.index("--ws") + 1] == WS_PROTOCOL
    assert "--no-proxy-headers" in command
    assert worker["user"] == "root"  # to start ranks as the job user, see the comment there
    assert worker["environment"]["TRAINBOARD_JOB_USER"] == "trainboard-job"


def test_the_image_creates_the_service_and_job_users_and_runs_as_the_service_user() -> None:
    lines = (ROOT / "Dockerfile").read_text().replace("\\\n", " ").splitlines()
    runs = " ".join(line for line in lines if line.startswith("RUN "))
    for account in ("trainboard", "trainboard-job"):
        assert re.search(rf"useradd --system [^&]*--shell /usr/sbin/nologin {account}\b", runs)
    assert "chmod 0711 /data" in runs
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users == ["trainboard"]
    cmd = next(line for line in lines if line.startswith("CMD "))
    assert "--ws" in cmd and WS_PROTOCOL in cmd


def test_the_tls_proxy_is_optional_and_the_only_trusted_forwarder() -> None:
    services = _services("tls")  # docker-compose 1.29's config lists every profile's services
    proxy = services["proxy"]
    assert proxy["profiles"] == ["tls"] and proxy["image"].startswith("caddy:")
    assert {p["target"] for p in proxy["ports"]} == {80, 443}
    address = proxy["networks"]["default"]["ipv4_address"]
    assert services["api"]["environment"]["TRAINBOARD_TRUSTED_PROXIES"] == address
    mounted = {v.split(":")[1]: v.split(":")[0] for v in proxy["volumes"]}
    caddyfile = Path(mounted["/etc/caddy/Caddyfile"]).read_text()
    assert "reverse_proxy api:8000" in caddyfile
