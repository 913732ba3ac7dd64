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


def accounting_installed() -> bool:
    """Whether slurmdbd and a MariaDB client are here (the server runs on every machine)."""
    return all(shutil.which(name) for name in ("slurmdbd", "sacct", "mysql"))


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


def _dbd_config(root: Path, *, port: int, database: str) -> str:
    return f"""\
AuthType=auth/munge
AuthInfo=socket={root}/munge/socket
DbdHost=localhost
DbdPort={port}
SlurmUser=root
PidFile={root}/slurmdbd.pid
LogFile={root}/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StorageUser=root
StorageLoc={database}
"""


def _config(
    root: Path, *, node: str, cpus: int, kill_wait: int, ports: list[int], dbd_port: int | None
) -> str:
    accounting = (
        f"AccountingStorageType=accounting_storage/slurmdbd\n"
        f"AccountingStorageHost=localhost\nAccountingStoragePort={dbd_port}\n"
        # the munge socket of the persistent connection to slurmdbd (AuthInfo does not cover it)
        f"AccountingStoragePass={root}/munge/socket\n"
        "JobAcctGatherType=jobacct_gather/linux\nJobAcctGatherFrequency=5"
        if dbd_port
        else "AccountingStorageType=accounting_storage/none"
    )
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
{accounting}
KillWait={kill_wait}
MinJobAge=600
InactiveLimit=0
NodeName={node} CPUs={cpus} State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


@contextlib.contextmanager
def slurm_cluster(
    root: Path, *, cpus: int = 2, kill_wait: int = 5, accounting: bool = False
) -> Iterator[SlurmCluster]:
    """Start munged, (slurmdbd,) slurmctld and slurmd in root; yield it once its node is idle.

    With accounting, slurmdbd stores jobs in a MariaDB database of its own on the machine's
    server (root over 127.0.0.1, as every machine here has it), dropped afterwards.
    """
    for folder in ("munge", "state", "spool", "log"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    os.chmod(root / "munge", 0o700)
    key = root / "munge" / "key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    node = socket.gethostname().split(".")[0]
    conf = root / "slurm.conf"
    ports = _free_ports(3)
    database = f"slurm_acct_{os.getpid()}_{ports[2]}"
    dbd_port = ports[2] if accounting else None
    conf.write_text(
        _config(root, node=node, cpus=cpus, kill_wait=kill_wait, ports=ports, dbd_port=dbd_port)
    )
    if accounting:
        dbd_conf = root / "slurmdbd.conf"
        dbd_conf.write_text(_dbd_config(root, port=ports[2], database=database))
        os.chmod(dbd_conf, 0o600)
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
        if accounting:
            processes.append(_daemon(root, ["slurmdbd", "-D"], env))
            _wait(lambda: _listening(ports[2]), "slurmdbd", processes, timeout=60)
        for daemon in ("slurmctld", "slurmd"):
            processes.append(_daemon(root, [daemon, "-D", "-f", str(conf)], env))
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
        if accounting:
            subprocess.run(
                [
                    "mysql",
                    "-h",
                    "127.0.0.1",
                    "-u",
                    "root",
                    "-e",
                    f"DROP DATABASE IF EXISTS {database}",
                ],
                capture_output=True,
                check=False,
            )


def _daemon(root: Path, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A daemon in the foreground, its output in log/<name>.out (slurmdbd reads slurmdbd.conf
    beside SLURM_CONF)."""
    with (root / "log" / f"{args[0]}.out").open("wb") as log:
        return subprocess.Popen(
            args,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


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
