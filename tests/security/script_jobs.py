"""A real supervisor for a hostile script job: its settings, a script root, an order."""

from __future__ import annotations

import dataclasses
import os
import socket
from pathlib import Path
from typing import Any

from tests.job_users import reachable
from workers.contract import run_layout
from workers.contract.protocol import AttemptOrder
from workers.contract.spec import JobSpec
from workers.node.settings import WorkerSettings
from workers.supervisor.job_user import prepare_isolation
from workers.supervisor.settings import SupervisorSettings


def script_settings(
    scratch: Path,
    redis_url: str,
    scripts: dict[str, str],
    *,
    data_dir: Path | None = None,
    uid_registry: Path | None = None,
    **worker: Any,
) -> SupervisorSettings:
    """What a root worker hands a supervisor (the job user in force, uids leased from
    uid_registry), with one script root under scratch holding scripts (name → text)."""
    settings = WorkerSettings(
        redis_url=redis_url,
        node_name="test-node",
        data_dir=reachable(data_dir or scratch / "data"),
        **worker,
    )
    root = reachable(scratch / "scripts")
    for name, text in scripts.items():
        (root / name).write_text(text)
        os.chmod(root / name, 0o644)
    isolation = prepare_isolation(
        account=settings.job_user,
        uid_base=settings.job_uid_base,
        allow_same_user=True,
        runs_dir=settings.data_dir / run_layout.RUNS,
        uid_registry=uid_registry or scratch / "uids",
    )
    return dataclasses.replace(settings.for_supervisor(isolation), script_roots=[root.resolve()])


def script_order(
    job_id: int, script: str, *args: str, deployment: str = "", env: dict[str, str] | None = None
) -> AttemptOrder:
    """Attempt 1 of a one-rank job running script with args, on CPU slot 0."""
    spec = JobSpec.model_validate(
        {
            "name": script.removesuffix(".py"),
            "entrypoint": {"script": script, "args": list(args)},
            "parallelism": {"devices": 1},
            "env": env or {},
        }
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    return AttemptOrder(
        attempt_id=job_id * 100 + 1,
        job_id=job_id,
        number=1,
        node="test-node",
        devices=[0],
        master_port=port,
        spec=spec,
        deployment=deployment,
    )
