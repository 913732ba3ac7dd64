"""A hostile job: tries every way out of its confinement, then trains and reports normally.

Run as a Trainboard script entrypoint. Prints one `PROBE <name> blocked|LEAK <detail>` line
per attempt; the test reads them from the job's log.
argv: DATA_DIR OTHER_JOB_DIR API_URL REDIS_SOCKET.
"""

from __future__ import annotations

import glob
import json
import os
import socket
import sys
import urllib.error
import urllib.request

from workers import sdk

SECRET_NAMES = ("DATABASE_URL", "NODE_TOKEN", "METRICS_TOKEN", "ADMIN_TOKEN", "REDIS")


def probe(name: str, attempt) -> None:  # type: ignore[no-untyped-def]
    try:
        detail = attempt()
    except (OSError, urllib.error.URLError, ValueError) as err:
        print(f"PROBE {name} blocked {type(err).__name__}", flush=True)
        return
    print(f"PROBE {name} LEAK {str(detail)[:200]!r}", flush=True)


def secrets_in_environment() -> str:
    leaked = [k for k in os.environ if any(s in k for s in SECRET_NAMES)]
    leaked += [k for k, v in os.environ.items() if "tb_" in v or "redis://" in v]
    if leaked:
        return ",".join(leaked)
    raise ValueError("no secret in the environment")


def other_processes_environment() -> str:
    mine = os.getuid()
    for path in glob.glob("/proc/[0-9]*/environ"):
        pid = int(path.split("/")[2])
        try:
            if os.stat(f"/proc/{pid}").st_uid == mine:
                continue
        except OSError:
            continue
        try:
            with open(path, "rb") as file:
                data = file.read()
        except OSError:
            continue
        if data:
            return f"read {path}"
    raise PermissionError("no other user's environment is readable")


def parent_environment() -> bytes:
    with open(f"/proc/{os.getppid()}/environ", "rb") as file:
        return file.read()[:64]


def database_file(data_dir: str) -> bytes:
    with open(os.path.join(data_dir, "trainboard.db"), "rb") as file:
        return file.read(16)


def redis_socket(path: str) -> str:
    client = socket.socket(socket.AF_UNIX)
    client.connect(path)
    client.sendall(b"PING\r\n")
    return client.recv(16).decode()


def write_other_job(other: str) -> str:
    path = os.path.join(other, "planted")
    with open(path, "w") as file:
        file.write("x")
    return path


def list_other_job(other: str) -> list[str]:
    return os.listdir(other)


def node_route(api: str) -> str:
    body = json.dumps({"name": "evil", "hostname": "evil", "address": "127.0.0.1", "devices": []})
    request = urllib.request.Request(
        f"{api}/api/nodes/register",
        data=body.encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return f"{answer.status}"


def main() -> None:
    data_dir, other_job, api, redis_path = sys.argv[1:5]
    probe("environment", secrets_in_environment)
    probe("parent-environ", parent_environment)
    probe("other-environ", other_processes_environment)
    probe("database-file", lambda: database_file(data_dir))
    probe("redis-socket", lambda: redis_socket(redis_path))
    probe("other-job-write", lambda: write_other_job(other_job))
    probe("other-job-list", lambda: list_other_job(other_job))
    probe("node-route", lambda: node_route(api))
    print(f"uid {os.getuid()} euid {os.geteuid()}", flush=True)
    # its own work goes on: train a little, report metrics, write its own checkpoint dir
    loss = 1.0
    for step in range(1, 21):
        loss *= 0.9
        sdk.report(step, loss=loss)
    checkpoints = sdk.checkpoint_dir()
    assert checkpoints is not None
    (checkpoints / "step-20").mkdir(parents=True, exist_ok=True)
    print("own work done", flush=True)


if __name__ == "__main__":
    main()
