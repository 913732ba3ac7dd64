"""A real one-host Slurm cluster (munged + slurmctld + slurmd) in a scratch folder, for tests.

Debian's `slurm-wlm` and `munge` (installed by .ci/run when missing) run without systemd
from a folder of their own: a random munge key and socket, a slurm.conf with free ports and
every state, spool, pid and log path inside the folder, so two test runs on one machine
never meet and nothing outlives the fixture.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from backend.executors.slurm.cli import SlurmCli

DAEMONS = ("munged", "slurmctld", "slurmd")


def slurm_installed() -> bool:
    """Whether this machine has Slurm's daemons and client commands and munge."""
    return all(shutil.which(name) for name in (*DAEMONS, "sbatch", "squeue", "scontrol"))


@dataclass
class SlurmCluster:
    """A running cluster: its folder, config and a client pointed at it."""

    root: Path
    conf: Path
    node: str
    cpus: int
    kill_wait: int
    processes: list[subprocess.Popen[bytes]]

    @property
    def cli(self) -> SlurmCli:
        return SlurmCli(conf=str(self.conf), timeout=15)

    @property
    def env(self) -> dict[str, str]:
        """The environment a Slurm client command needs to reach this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def log(self, daemon: str) -> str:
        path = self.root / "log" / f"{daemon}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _config(root: Path, *, node: str, cpus: int, kill_wait: int, ports: list[int]) -> str:
    return f"""\
ClusterName=tbtest
SlurmctldHost={node}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/socket
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
KillWait={kill_wait}
MinJobAge=600
InactiveLimit=0
NodeName={node} CPUs={cpus} State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


@contextlib.contextmanager
def slurm_cluster(root: Path, *, cpus: int = 2, kill_wait: int = 5) -> Iterator[SlurmCluster]:
    """Start munged, slurmctld and slurmd in root; yield the cluster once its node is idle."""
    for folder in ("munge", "state", "spool", "log"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    os.chmod(root / "munge", 0o700)
    key = root / "munge" / "key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    node = socket.gethostname().split(".")[0]
    conf = root / "slurm.conf"
    conf.write_text(_config(root, node=node, cpus=cpus, kill_wait=kill_wait, ports=_free_ports(2)))
    processes: list[subprocess.Popen[bytes]] = []
    env = {**os.environ, "SLURM_CONF": str(conf)}
    try:
        munge = root / "munge"
        processes.append(
            subprocess.Popen(
                [
                    "munged",
                    "--foreground",
                    "--force",
                    f"--key-file={key}",
                    f"--socket={munge / 'socket'}",
                    f"--pid-file={munge / 'pid'}",
                    f"--log-file={munge / 'log'}",
                    f"--seed-file={munge / 'seed'}",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
        _wait(lambda: (munge / "socket").exists(), "munged's socket", processes)
        for daemon in ("slurmctld", "slurmd"):
            log = (root / "log" / f"{daemon}.out").open("wb")
            processes.append(
                subprocess.Popen(
                    [daemon, "-D", "-f", str(conf)],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        cluster = SlurmCluster(root, conf, node, cpus, kill_wait, processes)
        _wait(lambda: _idle(cluster), "the Slurm node to be idle", processes, timeout=60)
        yield cluster
    finally:
        for process in reversed(processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in reversed(processes):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _idle(cluster: SlurmCluster) -> bool:
    try:
        nodes = cluster.cli.nodes()
    except Exception:  # the controller is still starting
        return False
    return bool(nodes) and all(n.state.split("+")[0] == "IDLE" for n in nodes)


def _wait(
    check: Callable[[], bool],
    what: str,
    processes: list[subprocess.Popen[bytes]],
    timeout: float = 20,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        dead = [str(p.args) for p in processes if p.poll() is not None]
        if dead:
            raise RuntimeError(f"{dead} exited while waiting for {what}")
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
