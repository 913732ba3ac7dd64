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

from backend.executors.slurm.cli import BatchRequest, SlurmCli

DAEMONS = ("munged", "slurmctld", "slurmd")
#: task/cgroup on the machine's cgroup v1 memory controller: a step's memory is its cgroup's
#: limit, and the kernel's OOM killer inside it makes Slurm record OUT_OF_MEMORY
CGROUP_CONF = """\
CgroupPlugin=cgroup/v1
CgroupAutomount=no
CgroupMountpoint=/sys/fs/cgroup
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
AllowedSwapSpace=0
ConstrainCores=no
ConstrainDevices=no
"""


def slurm_installed() -> bool:
    """Whether this machine has Slurm's daemons and client commands and munge."""
    return all(shutil.which(name) for name in (*DAEMONS, "sbatch", "squeue", "scontrol"))


def accounting_installed() -> bool:
    """Whether slurmdbd and a MariaDB client are here (the server runs on every machine)."""
    return all(shutil.which(name) for name in ("slurmdbd", "sacct", "mysql"))


@dataclass
class Host:
    """One Slurm node: its name and, on a two-host cluster, its network namespace."""

    name: str
    address: str
    namespace: str | None = None
    link: str | None = None

    def command(self, root: Path, args: list[str]) -> list[str]:
        """args run on this host: in its network namespace, with its own /etc/hosts (the
        machine's name resolves to the host's address there, as on a real node)."""
        if self.namespace is None:
            return args
        hosts = root / f"hosts-{self.name}"
        script = f'mount --bind {hosts} /etc/hosts && exec "$@"'
        return [
            "nsenter",
            f"--net=/var/run/netns/{self.namespace}",
            "unshare",
            "--mount",
            "sh",
            "-c",
            script,
            "sh",
            *args,
        ]


@dataclass
class SlurmCluster:
    """A running cluster: its folder, config, hosts and a client pointed at it."""

    root: Path
    conf: Path
    hosts: list[Host]
    cpus: int
    kill_wait: int
    processes: dict[str, subprocess.Popen[bytes]]

    @property
    def node(self) -> str:
        """The first node's name (the controller runs there)."""
        return self.hosts[0].name

    @property
    def cli(self) -> SlurmCli:
        """A client of this cluster, run on the controller's host."""
        prefix = self.hosts[0].command(self.root, [])
        return SlurmCli(conf=str(self.conf), timeout=15, prefix=prefix)

    @property
    def env(self) -> dict[str, str]:
        """The environment a Slurm client command needs to reach this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def log(self, daemon: str) -> str:
        path = self.root / "log" / f"{daemon}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop_slurmd(self, host: str) -> None:
        """Kill one host's slurmd (a node that died), leaving its jobs' processes to Slurm."""
        process = self.processes[f"slurmd-{host}"]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def start_slurmd(self, host: str) -> None:
        """Start a stopped host's slurmd again: it registers and (ReturnToService=2) the node
        takes jobs again."""
        found = next(h for h in self.hosts if h.name == host)
        named = ["-N", host] if len(self.hosts) > 1 else []
        command = found.command(self.root, ["slurmd", "-D", *named, "-f", str(self.conf)])
        again = _daemon(self.root, f"slurmd-{host}-again", command, self.env)
        self.processes[f"slurmd-{host}"] = again

    def stop_controller(self) -> None:
        """Stop slurmctld (its state saved): every client command is refused until it returns."""
        process = self.processes["slurmctld"]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)

    def start_controller(self) -> None:
        """Start slurmctld again; it recovers its jobs from the state folder."""
        command = self.hosts[0].command(self.root, ["slurmctld", "-D", "-f", str(self.conf)])
        self.processes["slurmctld"] = _daemon(self.root, "slurmctld-again", command, self.env)

    def occupy(self, *, partition: str, cpus: int, seconds: int, name: str = "other-team") -> str:
        """Another team's job straight to Slurm: `cpus` CPUs of one node for `seconds` (on
        a higher tier's partition, it preempts what holds them); its Slurm job id."""
        return self.cli.submit(
            BatchRequest(
                name=name,
                script=f"#!/bin/sh\nsleep {seconds}\n",
                nodes=1,
                cpus_per_task=cpus,
                partition=partition,
            )
        )

    def cut(self, host: str) -> None:
        """Take one host's link down (a partition: peers get 'network unreachable')."""
        found = next(h for h in self.hosts if h.name == host)
        assert found.namespace and found.link, "only a two-host cluster has links"
        subprocess.run(["ip", "-n", found.namespace, "link", "set", found.link, "down"], check=True)

    def restore(self, host: str) -> None:
        """Bring a cut host's link up again."""
        found = next(h for h in self.hosts if h.name == host)
        assert found.namespace and found.link, "only a two-host cluster has links"
        subprocess.run(["ip", "-n", found.namespace, "link", "set", found.link, "up"], check=True)


def cgroups_usable() -> bool:
    """Whether task/cgroup can run here: cgroup v1's memory controller, mounted writable."""
    memory = Path("/sys/fs/cgroup/memory")
    return (memory / "memory.limit_in_bytes").is_file() and os.access(memory, os.W_OK)


def _remove_cgroups(nodes: list[str]) -> None:
    """The cgroups slurmd made (`slurm_<node>` and below), removed deepest first once empty."""
    for node in nodes:
        top = Path("/sys/fs/cgroup/memory") / f"slurm_{node}"
        if top.is_dir():
            for folder in sorted(top.rglob("*"), key=lambda p: len(p.parts), reverse=True):
                if folder.is_dir():
                    with contextlib.suppress(OSError):
                        folder.rmdir()
            with contextlib.suppress(OSError):
                top.rmdir()


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _gres_conf(root: Path, gpus: dict[str, int]) -> str:
    """gres.conf (beside slurm.conf, where slurmd reads it) for `gpus` (type: count per
    node). slurmd drops a GPU without `File=` ("Ignoring file-less GPU"), so each names a
    plain file `dev/nvidiaN` in the cluster's folder: slurmd logs that it is "not a valid
    character or block device" and keeps it (nothing constrains devices here, task/none),
    and nothing on the machine looks like a GPU. With accounting, AccountingStorageTRES
    adds gres/gpu, so CfgTRES, squeue's tres-alloc and sacct's AllocTRES count them."""
    lines, first = [], 0
    (root / "dev").mkdir(exist_ok=True)
    for kind, count in gpus.items():
        for index in range(first, first + count):
            (root / "dev" / f"nvidia{index}").touch()
        typed = f" Type={kind}" if kind else ""
        lines.append(f"Name=gpu{typed} File={root}/dev/nvidia[{first}-{first + count - 1}]\n")
        first += count
    return "".join(lines)


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
    root: Path,
    *,
    hosts: list[Host],
    cpus: int,
    kill_wait: int,
    ports: list[int],
    dbd_port: int | None,
    grace_time: int | None = None,
    gres: str = "",
    memory: int | None = None,
    cgroups: bool = False,
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
    # memory: each node has `memory` MB, allocated with its CPUs (CR_CPU_Memory: limits are
    # only handed to the steps when memory is a consumable resource; each CPU brings its
    # share, DefMemPerCPU, so jobs share a node as under CR_CPU), and a step whose processes'
    # RSS sum passes its job's memory is killed by slurmstepd's polling (OverMemoryKill: no
    # cgroups here)
    enforce = (
        ("" if cgroups else "JobAcctGatherParams=OverMemoryKill\n")
        + f"DefMemPerCPU={memory // cpus}"
        + ("" if dbd_port else "\nJobAcctGatherType=jobacct_gather/linux\nJobAcctGatherFrequency=1")
        if memory
        else ""
    )
    node_memory = f" RealMemory={memory}" if memory else ""
    machine = socket.gethostname().split(".")[0]
    node_gres = f" Gres={gres}" if gres else ""
    if len(hosts) == 1:
        controller = machine
        nodes = f"NodeName={machine} CPUs={cpus}{node_memory}{node_gres} State=UNKNOWN"
    else:  # every slurmd on this machine, each in its namespace under its own node name
        controller = f"{machine}({hosts[0].address})"
        nodes = "\n".join(
            f"NodeName={h.name} NodeHostname={machine} NodeAddr={h.address} CPUs={cpus}"
            f"{node_memory}{node_gres} State=UNKNOWN"
            for h in hosts
        )
    if grace_time is None:
        partitions = "PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    else:  # Slurm's preemption: a job of `high` requeues (or, not requeueable, cancels) one of
        # `low`, whose tasks get SIGTERM GraceTime seconds before they are killed
        partitions = (
            "PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\n"
            "PartitionName=low Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1 "
            f"PreemptMode=REQUEUE GraceTime={grace_time}\n"
            "PartitionName=high Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF"
        )
    return f"""\
ClusterName=tbtest
SlurmctldHost={controller}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/socket
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin={"task/cgroup" if cgroups else "task/none"}
SelectType=select/cons_tres
SelectTypeParameters={"CR_CPU_Memory" if memory else "CR_CPU"}
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
{"GresTypes=gpu" if gres else ""}
{"AccountingStorageTRES=gres/gpu" if gres and dbd_port else ""}
{accounting}
{enforce}
KillWait={kill_wait}
SlurmdTimeout=10
MinJobAge=600
InactiveLimit=0
{nodes}
{partitions}
"""


@contextlib.contextmanager
def slurm_cluster(
    root: Path,
    *,
    cpus: int = 2,
    kill_wait: int = 5,
    accounting: bool = False,
    hosts: int = 1,
    grace_time: int | None = None,
    gpus: dict[str, int] | None = None,
    memory: int | None = None,
    cgroups: bool = False,
) -> Iterator[SlurmCluster]:
    """Start munged, (slurmdbd,) slurmctld and slurmd in root; yield it once every node is idle.

    With grace_time, Slurm preempts: two partitions, `low` (the default) and `high` of a
    higher PriorityTier, `PreemptType=preempt/partition_prio`, `PreemptMode=REQUEUE` and
    `GraceTime=grace_time` on `low` (else one partition, `main`).

    With gpus (GPU type: count per node, "" for untyped), every node declares that many
    GPUs as GRES, each a plain file standing for its device (Debian's build has no NVML and
    this machine no GPU), so Slurm allocates and accounts them as it would real ones.

    With accounting, slurmdbd stores jobs in a MariaDB database of its own on the machine's
    server (root over 127.0.0.1, as every machine here has it), dropped afterwards. With two
    hosts, each slurmd runs in a network namespace of its own joined by a veth pair (the
    controller in the first), so srun's traffic between them crosses a link a test can cut.
    """
    assert hosts in (1, 2), "one host, or two joined by one veth pair"
    assert not (accounting and hosts > 1), "slurmdbd listens in the root namespace"
    for folder in ("munge", "state", "spool", "log"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    os.chmod(root / "munge", 0o700)
    key = root / "munge" / "key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    ports = _free_ports(3)
    database = f"slurm_acct_{os.getpid()}_{ports[2]}"
    dbd_port = ports[2] if accounting else None
    conf = root / "slurm.conf"
    processes: dict[str, subprocess.Popen[bytes]] = {}
    env = {**os.environ, "SLURM_CONF": str(conf)}
    with contextlib.ExitStack() as cleanup:
        machines = (
            [Host(socket.gethostname().split(".")[0], "127.0.0.1")]
            if hosts == 1
            else cleanup.enter_context(_namespaces(root))
        )
        gres = ",".join(
            f"gpu:{kind}:{n}" if kind else f"gpu:{n}" for kind, n in (gpus or {}).items()
        )
        (root / "gres.conf").write_text(_gres_conf(root, gpus or {}))
        conf.write_text(
            _config(
                root,
                hosts=machines,
                cpus=cpus,
                kill_wait=kill_wait,
                ports=ports,
                dbd_port=dbd_port,
                grace_time=grace_time,
                gres=gres,
                memory=memory,
                cgroups=cgroups,
            )
        )
        if cgroups:
            (root / "cgroup.conf").write_text(CGROUP_CONF)
            cleanup.callback(_remove_cgroups, [h.name for h in machines])
        cleanup.callback(_stop, processes)
        if accounting:
            cleanup.callback(_drop_database, database)
            dbd_conf = root / "slurmdbd.conf"
            dbd_conf.write_text(_dbd_config(root, port=ports[2], database=database))
            os.chmod(dbd_conf, 0o600)
        munge = root / "munge"
        processes["munged"] = subprocess.Popen(
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
        _wait(lambda: (munge / "socket").exists(), "munged's socket", processes)
        if accounting:
            processes["slurmdbd"] = _daemon(root, "slurmdbd", ["slurmdbd", "-D"], env)
            _wait(lambda: _listening(ports[2]), "slurmdbd", processes, timeout=60)
        controller = machines[0].command(root, ["slurmctld", "-D", "-f", str(conf)])
        processes["slurmctld"] = _daemon(root, "slurmctld", controller, env)
        for host in machines:
            named = ["-N", host.name] if hosts > 1 else []
            command = host.command(root, ["slurmd", "-D", *named, "-f", str(conf)])
            processes[f"slurmd-{host.name}"] = _daemon(root, f"slurmd-{host.name}", command, env)
        cluster = SlurmCluster(root, conf, machines, cpus, kill_wait, processes)
        _wait(lambda: _idle(cluster, hosts), "every Slurm node to be idle", processes, timeout=60)
        cleanup.callback(_cancel_everything, cluster)
        yield cluster


@contextlib.contextmanager
def _namespaces(root: Path) -> Iterator[list[Host]]:
    """Two network namespaces joined by a veth pair, with an /etc/hosts for each; removed after."""
    tag = f"tb{os.getpid() % 100000}{os.urandom(2).hex()}"
    subnet = f"10.{200 + os.getpid() % 50}.{int.from_bytes(os.urandom(1), 'big')}"
    machine = socket.gethostname().split(".")[0]
    hosts = [
        Host(f"h{i}", f"{subnet}.{i}", namespace=f"{tag}h{i}", link=f"v{tag}{i}") for i in (1, 2)
    ]
    made: list[str] = []
    try:
        for host in hosts:
            subprocess.run(["ip", "netns", "add", host.namespace or ""], check=True)
            made.append(host.namespace or "")
        first, second = hosts
        subprocess.run(
            [
                "ip",
                "link",
                "add",
                first.link or "",
                "type",
                "veth",
                "peer",
                "name",
                second.link or "",
            ],
            check=True,
        )
        for host in hosts:
            ns, link = host.namespace or "", host.link or ""
            for args in (
                ["ip", "link", "set", link, "netns", ns],
                ["ip", "-n", ns, "addr", "add", f"{host.address}/24", "dev", link],
                ["ip", "-n", ns, "link", "set", "lo", "up"],
                ["ip", "-n", ns, "link", "set", link, "up"],
            ):
                subprocess.run(args, check=True)
            others = "".join(f"{h.address} {h.name}\n" for h in hosts if h is not host)
            (root / f"hosts-{host.name}").write_text(
                f"127.0.0.1 localhost\n{host.address} {machine} {host.name}\n{others}"
            )
        yield hosts
    finally:
        for namespace in made:
            # a slurmstepd cut off from its slurmd lives on in the namespace with its tasks
            pids = subprocess.run(
                ["ip", "netns", "pids", namespace], capture_output=True, text=True, check=False
            ).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            # deleting a namespace deletes its end of the veth pair, and so the pair
            subprocess.run(["ip", "netns", "del", namespace], check=False)


def _daemon(root: Path, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A daemon in the foreground, its output in log/<name>.out (slurmdbd reads slurmdbd.conf
    beside SLURM_CONF)."""
    with (root / "log" / f"{name}.out").open("wb") as log:
        return subprocess.Popen(
            args,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _cancel_everything(cluster: SlurmCluster) -> None:
    """scancel every job and wait until Slurm has ended them (their tasks killed after
    KillWait), so that no task outlives the cluster."""
    with contextlib.suppress(Exception):
        subprocess.run(
            [*cluster.hosts[0].command(cluster.root, []), "scancel", "--user=root"],
            env=cluster.env,
            capture_output=True,
            timeout=15,
            check=False,
        )
        deadline = time.monotonic() + cluster.kill_wait + 10
        while cluster.cli.queue("") and time.monotonic() < deadline:
            time.sleep(0.5)


def _stop(processes: dict[str, subprocess.Popen[bytes]]) -> None:
    """SIGTERM every daemon (last started first), SIGKILL what is left after 15 s."""
    for process in reversed(processes.values()):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    for process in reversed(processes.values()):
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _drop_database(database: str) -> None:
    subprocess.run(
        ["mysql", "-h", "127.0.0.1", "-u", "root", "-e", f"DROP DATABASE IF EXISTS {database}"],
        capture_output=True,
        check=False,
    )


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _idle(cluster: SlurmCluster, count: int) -> bool:
    try:
        nodes = cluster.cli.nodes()
    except Exception:  # the controller is still starting
        return False
    return len(nodes) == count and all(n.state.split("+")[0] == "IDLE" for n in nodes)


def _wait(
    check: Callable[[], bool],
    what: str,
    processes: dict[str, subprocess.Popen[bytes]],
    timeout: float = 20,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        dead = [name for name, p in processes.items() if p.poll() is not None]
        if dead:
            raise RuntimeError(f"{dead} exited while waiting for {what}")
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
