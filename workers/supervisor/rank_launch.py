"""Starting one rank process: as the job's user, with its allow-listed environment and pipe."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from workers.contract import entrypoints
from workers.contract.spec import Entrypoint
from workers.supervisor.containment import Containment
from workers.supervisor.job_user import JobIdentity
from workers.supervisor.orphan_guard import guarded
from workers.supervisor.rank_environment import rank_environment
from workers.supervisor.run_dirs import AttemptDirs

#: where the `workers` package lives: the engine and the SDK are imported from here
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def rank_command(
    entry: Entrypoint | None, *, script_roots: Sequence[Path], run_dir: Path
) -> tuple[list[str], list[str], Path | None]:
    """argv, PYTHONPATH and working directory of every rank: the engine's, or the job's script."""
    if entry is None:
        return [sys.executable, "-m", "workers.rank.engine"], [PACKAGE_ROOT], None
    # resolved again here: the API's check ran on another machine, maybe long ago
    launch = entrypoints.resolve(entry, script_roots)
    return launch.argv, [str(launch.root), PACKAGE_ROOT], run_dir


def start_rank(
    argv: list[str],
    *,
    cwd: Path | None,
    rank_vars: Mapping[str, str],
    spec_env: Mapping[str, str],
    python_paths: list[str],
    dirs: AttemptDirs,
    identity: JobIdentity,
    interface: str | None,
    telemetry_fd: int,
    process_group: int | None,
    containment: Containment,
) -> subprocess.Popen[bytes]:
    """Start a rank (killed with its supervisor, no new privileges) in the attempt's group.

    It runs nothing of the job's before it is in the attempt's containment (its cgroup).
    """
    environment = rank_environment(
        worker_env=os.environ,
        rank_vars=rank_vars,
        spec_env=spec_env,
        python_paths=python_paths,
        home=dirs.home.resolve(),
        tmp=dirs.tmp.resolve(),
        user=identity.name,
        interpreter=sys.executable,
        interface=interface,
    )
    # process_group=0 makes the first rank lead a new group; the others join it.
    # (A new session would not do: setpgid cannot join a group in another session.)
    process = subprocess.Popen(
        guarded(argv, cgroup=containment.relative),
        env=environment,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=(telemetry_fd,),
        process_group=process_group or 0,
        user=identity.uid,
        group=identity.gid,
        extra_groups=[] if identity.switches else None,
    )
    try:
        containment.adopt(process.pid)
    except Exception:
        process.kill()
        process.wait()
        raise
    return process


def free_port() -> int:
    """A TCP port nothing listens on now (the OS picks it)."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])
