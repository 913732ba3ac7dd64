"""Starting one rank process: as the job's user, with its command, its allow-listed
environment and its pipe.

The environment is an allow-list, never the worker's environment minus a few. A rank gets
torchrun's variables and its own attempt's TRAINBOARD_* settings (see
`workers.contract.rank_env`), locale, time zone, threads, the GPU/network variables an
operator sets for every job (CUDA_*, NVIDIA_*, NCCL_*, GLOO_*), a PATH, its own HOME and
TMPDIR, and the spec's `env`. Nothing else of the worker's: no database URL, no token, no
Redis URL or password.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from workers.contract import entrypoints
from workers.contract.protocol import AttemptOrder
from workers.contract.rank_env import RankEnv
from workers.contract.spec import Entrypoint
from workers.supervisor.containment import Containment
from workers.supervisor.job_user import JobIdentity
from workers.supervisor.orphan_guard import guarded
from workers.supervisor.run_dirs import AttemptDirs

#: where the `workers` package lives: the engine and the SDK are imported from here
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


#: worker variables passed through as they are
PASSED = frozenset({"LANG", "LANGUAGE", "TZ", "TERM"})
#: worker variables passed through by prefix (operator settings of the hosts' GPUs/network)
PASSED_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "NCCL_", "GLOO_")
#: never passed from the worker, whatever the prefix says (the supervisor sets them itself)
WITHHELD = frozenset({"CUDA_VISIBLE_DEVICES"})
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


def rank_environment(
    *,
    worker_env: Mapping[str, str],
    rank_vars: Mapping[str, str],
    spec_env: Mapping[str, str],
    python_paths: list[str],
    home: Path,
    tmp: Path,
    user: str,
    interpreter: str,
    interface: str | None = None,
) -> dict[str, str]:
    """Everything a rank process sees in its environment, built from an allow-list.

    With the node's advertised interface, gloo and NCCL's sockets are pinned to it: left
    alone they take the address the hostname resolves to, a loopback one on stock
    Debian/Ubuntu and in most containers, and peers on other hosts are refused. The job's
    own `env` may still set either.
    """
    env = {
        name: value
        for name, value in worker_env.items()
        if (name in PASSED or name.startswith(PASSED_PREFIXES)) and name not in WITHHELD
    }
    if interface:
        env.update({"GLOO_SOCKET_IFNAME": interface, "NCCL_SOCKET_IFNAME": interface})
    env.update(spec_env)  # the job's own (validated at submit: no TRAINBOARD_*, loader, ...)
    env.update(
        {
            # the interpreter's own bin first: a venv's tools, then the system's
            "PATH": os.pathsep.join([str(Path(interpreter).parent), SAFE_PATH]),
            "HOME": str(home),
            "TMPDIR": str(tmp),
            "USER": user,
            "LOGNAME": user,
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(python_paths),
        }
    )
    env.update(rank_vars)  # torchrun's variables and this attempt's own: nothing overrides them
    return env


def local_rank_envs(
    order: AttemptOrder, *, master_port: int, run_dir: Path, checkpoint_dir: Path, use_gpus: bool
) -> list[RankEnv]:
    """torchrun's variables and the attempt's own for each local rank of this node."""
    local = len(order.devices)
    visible = ",".join(map(str, order.devices)) if use_gpus else None
    resume = Path(order.resume_from) if order.resume_from else None
    return [
        RankEnv(
            rank=order.node_rank * local + i,
            local_rank=i,
            world_size=order.nnodes * local,
            local_world_size=local,
            group_rank=order.node_rank,
            master_addr=order.master_addr,
            master_port=master_port,
            run_id=f"trainboard-job{order.job_id}-attempt{order.attempt_id}",
            attempt_id=order.attempt_id,
            job_id=order.job_id,
            spec_file=(run_dir / "spec.json").resolve(),
            run_dir=run_dir.resolve(),
            checkpoint_dir=checkpoint_dir.resolve(),
            resume_from=resume,
            cuda_visible_devices=visible,
        )
        for i in range(local)
    ]


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
    containment.adopt(process)
    return process


def free_port() -> int:
    """A TCP port nothing listens on now (the OS picks it)."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])
