"""Slurm through its command-line tools: sbatch, squeue, scancel, sinfo/scontrol, sacct.

Trainboard drives Slurm the way dstack, Submitit and Determined's launcher do: through the
commands whose output formats have held for a decade, never the REST daemon (whose API
versions are removed every few releases). Every command runs with a timeout and `SLURM_CONF`
from the settings; every output is parsed here, by pure functions tested on recorded output
of two Slurm releases (tests/executors/slurm_recorded/). One `squeue` call reads every
Trainboard job of a deployment (they share the name prefix `tb-<deployment>-`), so the poll
costs the controller one RPC whatever the queue length.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

#: the squeue fields read, in order (`squeue -O`, each `:|` so that '|' ends every field)
SQUEUE_FIELDS = (
    "JobID",
    "Name",
    "State",
    "Reason",
    "NodeList",
    "NumNodes",
    "RestartCnt",
    "Partition",
    "tres-alloc",
    "StartTime",
)
#: the sacct fields read (`sacct --parsable2`), in order
SACCT_FIELDS = (
    "JobIDRaw",
    "JobName",
    "State",
    "ExitCode",
    "Reason",
    "ElapsedRaw",
    "AllocTRES",
    "NodeList",
    "Partition",
)
DEFAULT_TIMEOUT = 30.0
#: SLURM_TIME_FORMAT that makes Slurm's commands print times as Unix seconds
EPOCH = "%s"


class SlurmError(RuntimeError):
    """A Slurm command failed or its output could not be read."""


class SlurmUnreachable(SlurmError):
    """The controller did not answer (timeout, connection refused, munge down)."""


@dataclass(frozen=True)
class QueuedJob:
    """One job as `squeue` shows it: pending, running or just ending."""

    job_id: str
    name: str
    state: str
    reason: str | None
    nodes: tuple[str, ...]
    node_count: int
    restarts: int
    partition: str
    tres: Mapping[str, str] = field(default_factory=dict)
    #: when its allocation started (UTC); for a pending job Slurm's expected start, if any
    start: datetime | None = None


@dataclass(frozen=True)
class AccountedJob:
    """One job's accounting record (`sacct`), the allocation line, not its steps."""

    job_id: str
    name: str
    state: str
    exit_code: int
    signal: int
    reason: str | None
    restarts: int
    elapsed: timedelta
    tres: Mapping[str, str]
    nodes: tuple[str, ...]
    partition: str

    def allocated(self, resource: str) -> float:
        """Allocated `resource` (e.g. "gres/gpu", "cpu") × elapsed, in resource-hours."""
        count = _tres_count(self.tres.get(resource))
        return count * self.elapsed.total_seconds() / 3600.0


@dataclass(frozen=True)
class SlurmNode:
    """One node as `scontrol show node` describes it."""

    name: str
    state: str
    cpus: int
    cpus_allocated: int
    gres: str | None
    partitions: tuple[str, ...]
    reason: str | None
    #: CfgTRES: what the node offers as trackable resources (`cpu=8,mem=...,gres/gpu=4`)
    tres: Mapping[str, str] = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        """Its GPUs: every `gpu` item of its Gres summed (`gpu:4`, `gpu:a100:2(S:0-1),gpu:v100:2`,
        `gpu:2,shard:8`), else CfgTRES's `gres/gpu`."""
        return gres_gpus(self.gres) or int(_tres_count(self.tres.get("gres/gpu")))

    @property
    def flags(self) -> set[str]:
        """The state's parts: `IDLE+DRAIN` → {IDLE, DRAIN}; a trailing `*` is NOT_RESPONDING."""
        return set(self.state.upper().replace("*", "+NOT_RESPONDING").split("+")) - {""}

    @property
    def lost(self) -> bool:
        """Down, not responding or failing: what ran there is gone."""
        return bool(self.flags & {"DOWN", "NOT_RESPONDING", "FAIL", "FAILING", "POWERED_DOWN"})

    @property
    def health(self) -> Literal["up", "drained", "lost"]:
        """lost (above); drained: it takes no new work (drain, maintenance, powering off or
        down, future, reserved); else up."""
        if self.lost:
            return "lost"
        idle_only = {"DRAIN", "DRAINING", "DRAINED", "MAINTENANCE", "MAINT", "RESERVED"}
        off = {"POWERING_DOWN", "POWER_DOWN", "POWERED_DOWN", "POWERING_UP", "FUTURE"}
        if self.flags & (idle_only | off):
            return "drained"
        return "up"


@dataclass(frozen=True)
class BatchRequest:
    """What one Trainboard attempt asks of Slurm: one job, one supervisor per node."""

    name: str
    script: str
    nodes: int
    tasks_per_node: int = 1
    cpus_per_task: int = 1
    gpus_per_node: int = 0
    partition: str | None = None
    output: str = "/dev/null"
    requeue: bool = False
    #: signal sent this many seconds before the time limit or a preemption kill (B: the batch
    #: shell, which forwards it to the supervisors), so they checkpoint first
    signal: str | None = None
    extra: Sequence[str] = ()

    def arguments(self) -> list[str]:
        """The sbatch command line for this request (the script goes on stdin)."""
        args = [
            "sbatch",
            "--parsable",
            f"--job-name={self.name}",
            f"--nodes={self.nodes}",
            f"--ntasks-per-node={self.tasks_per_node}",
            f"--cpus-per-task={self.cpus_per_task}",
            f"--output={self.output}",
            "--requeue" if self.requeue else "--no-requeue",
        ]
        if self.gpus_per_node:  # --gres works under select/cons_res too (--gpus-per-node
            args.append(gpu_option(self.gpus_per_node))  # needs cons_tres)
        if self.partition:
            args.append(f"--partition={self.partition}")
        if self.signal:
            args.append(f"--signal={self.signal}")
        return [*args, *self.extra]


class SlurmCli:
    """The commands of one Slurm cluster (`SLURM_CONF`), each with a timeout."""

    def __init__(
        self,
        *,
        conf: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        prefix: Sequence[str] = (),
    ) -> None:
        self.conf = conf
        self.timeout = timeout
        #: what each command runs under, e.g. ["ssh", "login1"] where only a login node
        #: reaches the controller
        self.prefix = list(prefix)

    def submit(self, request: BatchRequest) -> str:
        """Submit one batch job; its Slurm job id."""
        out = self._run(request.arguments(), stdin=request.script)
        job_id = out.strip().split(";")[0]  # --parsable: "id" or "id;cluster"
        if not job_id.isdigit():
            raise SlurmError(f"sbatch answered {out.strip()!r}, not a job id")
        return job_id

    def queue(self, name_prefix: str) -> dict[str, QueuedJob]:
        """Every queued or running job whose name starts with name_prefix, by job id."""
        fmt = ",".join(f"{name}:|" for name in SQUEUE_FIELDS)
        # times as Unix seconds (SLURM_TIME_FORMAT), not the controller's local time
        out = self._run(
            [
                "env",
                f"SLURM_TIME_FORMAT={EPOCH}",
                "squeue",
                "--noheader",
                "--all",
                f"--Format={fmt}",
            ]
        )
        return {job.job_id: job for job in parse_squeue(out) if job.name.startswith(name_prefix)}

    def cancel(self, job_id: str, *, signal: str | None = None, batch_only: bool = False) -> None:
        """scancel the job (or only signal it: signal="USR1", batch_only for the batch shell)."""
        args = ["scancel"]
        if signal:
            args.append(f"--signal={signal}")
        if batch_only:
            args.append("--batch")
        self._run([*args, job_id])

    def accounting(self, job_ids: Iterable[str]) -> dict[str, AccountedJob]:
        """sacct's record of each job (its allocation line, of its last run), by job id."""
        return {job_id: runs[-1] for job_id, runs in self.accounting_runs(job_ids).items()}

    def accounting_runs(self, job_ids: Iterable[str]) -> dict[str, list[AccountedJob]]:
        """sacct's allocation line of every run of each job (a requeued job has several),
        by job id, in run order. One sacct call for all of them."""
        ids = ",".join(job_ids)
        if not ids:
            return {}
        out = self._run(
            [
                "sacct",
                "--parsable2",
                "--noheader",
                "--allocations",
                "--duplicates",
                f"--jobs={ids}",
                f"--format={','.join(SACCT_FIELDS)}",
            ]
        )
        runs: dict[str, list[AccountedJob]] = {}
        for run in parse_sacct_runs(out):
            runs.setdefault(run.job_id, []).append(run)
        return runs

    def job(self, job_id: str) -> AccountedJob | None:
        """The controller's record of one job (`scontrol show job`): the state and exit code
        without accounting storage; None once the controller forgot it (MinJobAge)."""
        try:
            out = self._run(["scontrol", "show", "job", "--oneliner", job_id])
        except SlurmError as err:
            if "invalid job id" in str(err).lower():
                return None
            raise
        jobs = parse_scontrol_jobs(out)
        return jobs[0] if jobs else None

    def nodes(self) -> list[SlurmNode]:
        """Every node of the cluster with its state (`scontrol show node --oneliner`)."""
        return parse_scontrol_nodes(self._run(["scontrol", "show", "node", "--oneliner"]))

    def _run(self, args: list[str], *, stdin: str | None = None) -> str:
        env = dict(os.environ)
        if self.conf:
            env["SLURM_CONF"] = self.conf
        try:
            done = subprocess.run(
                [*self.prefix, *args],
                input=stdin,
                capture_output=True,
                text=True,
                env=env,
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as err:
            raise SlurmUnreachable(f"{args[0]} did not answer within {self.timeout:.0f} s") from err
        except FileNotFoundError as err:
            raise SlurmError(f"{args[0]} is not installed (Slurm's client commands)") from err
        if done.returncode != 0:
            message = done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}"
            if _unreachable(message):
                raise SlurmUnreachable(f"{args[0]}: {message}")
            raise SlurmError(f"{args[0]}: {message}")
        return done.stdout


_UNREACHABLE = (
    "unable to contact slurm controller",
    "connection refused",
    "socket timed out",
    "munge",
    "communication connection failure",
    "zero bytes were transmitted",
)


def _unreachable(message: str) -> bool:
    lowered = message.lower()
    return any(marker in lowered for marker in _UNREACHABLE)


def gpu_option(count: int) -> str:
    """The sbatch/srun option for `count` GPUs on each node: `--gres=gpu:N` (any GPU type),
    which every select plugin takes, where `--gpus-per-node` needs select/cons_tres."""
    return f"--gres=gpu:{count}"


def gres_gpus(gres: str | None) -> int:
    """The GPU count of a Gres string: every `gpu` item summed (`gpu:8`, `gpu:a100:4(S:0-1)`,
    `gpu:a100:2(S:0),gpu:v100:2(S:1)`, `gpu:2,shard:8`); 0 for none."""
    total = 0
    for item in _split_top_level(gres or ""):
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu" and len(parts) > 1 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def parse_squeue(text: str) -> list[QueuedJob]:
    """Rows of `squeue --noheader --Format=<SQUEUE_FIELDS, each :|>`."""
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) < len(SQUEUE_FIELDS):
            raise SlurmError(f"squeue line with {len(cells)} fields: {line!r}")
        job_id, name, state, reason, nodelist, count, restarts, partition, tres, start = cells[
            : len(SQUEUE_FIELDS)
        ]
        jobs.append(
            QueuedJob(
                job_id=job_id,
                name=name,
                state=state.upper(),
                reason=_none(reason),
                nodes=expand_hostlist(nodelist),
                node_count=_int(count),
                restarts=_int(restarts),
                partition=partition,
                tres=parse_tres(tres),
                start=parse_time(start),
            )
        )
    return jobs


def parse_time(text: str) -> datetime | None:
    """A Slurm time as UTC: Unix seconds (SLURM_TIME_FORMAT=%s, as the queue asks for), or
    the default `2026-11-28T22:06:43`, which is the controller's local time, read here as
    this machine's; None for `N/A`, `Unknown`, `None` and empty."""
    text = text.strip()
    if text.isdigit():
        return datetime.fromtimestamp(int(text), tz=UTC)
    try:
        local = datetime.fromisoformat(text)
    except ValueError:
        return None
    return local.astimezone(UTC)  # naive: this machine's local time


def parse_sacct(text: str) -> list[AccountedJob]:
    """Each job's current run (its last allocation line) of `sacct --parsable2 --noheader
    --format=<SACCT_FIELDS>`: `restarts` counts the runs before it."""
    jobs = {run.job_id: run for run in parse_sacct_runs(text)}
    return list(jobs.values())


def parse_sacct_runs(text: str) -> list[AccountedJob]:
    """Every allocation line of `sacct --parsable2 --noheader --format=<SACCT_FIELDS>`.

    A requeued job has one line per run with --duplicates, in run order; each run's
    `restarts` is the number of runs before it (sacct has no restart field). Step lines
    (`123.batch`, `123.0`) are skipped: the allocation line carries AllocTRES.
    """
    jobs: list[AccountedJob] = []
    runs: dict[str, int] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = line.split("|")
        if len(cells) < len(SACCT_FIELDS):
            raise SlurmError(f"sacct line with {len(cells)} fields: {line!r}")
        job_id, name, state, exit_code, reason, elapsed, tres, nodes, partition = cells[
            : len(SACCT_FIELDS)
        ]
        if "." in job_id:
            continue
        runs[job_id] = runs.get(job_id, -1) + 1
        code, signal = _exit_code(exit_code)
        hosts = expand_hostlist(nodes)
        jobs.append(
            AccountedJob(
                job_id=job_id,
                name=name,
                state=base_state(state),
                exit_code=code,
                signal=signal,
                # sacct's Reason is "the last reason a job was blocked from running" (sacct(1)),
                # kept after it ran: it says why a run that never got nodes ended (held,
                # a dependency), not why one that ran did (a requeued job that then completed
                # reads BeginTime: recorded/24.11/sacct.txt)
                reason=None if hosts else _none(reason),
                restarts=runs[job_id],
                elapsed=timedelta(seconds=_int(elapsed)),
                tres=parse_tres(tres),
                nodes=hosts,
                partition=partition,
            )
        )
    return jobs


def parse_scontrol_jobs(text: str) -> list[AccountedJob]:
    """Jobs of `scontrol show job --oneliner` as accounting records (elapsed = RunTime)."""
    jobs = []
    for fields in _oneliner_records(text, "JobId"):
        code, signal = _exit_code(fields.get("ExitCode", "0:0"))
        jobs.append(
            AccountedJob(
                job_id=fields["JobId"],
                name=fields.get("JobName", ""),
                state=base_state(fields.get("JobState", "UNKNOWN")),
                exit_code=code,
                signal=signal,
                reason=_none(fields.get("Reason", "")),
                restarts=_int(fields.get("Restarts", "0")),
                elapsed=parse_duration(fields.get("RunTime", "0")),
                # 22.05 prints TRES=; later releases ReqTRES= and AllocTRES= (recorded/24.11, 24.x)
                tres=parse_tres(fields.get("AllocTRES") or fields.get("TRES", "")),
                nodes=expand_hostlist(fields.get("NodeList", "")),
                partition=fields.get("Partition", ""),
            )
        )
    return jobs


#: what slurmstepd writes into a job's output when it kills a step over its memory
#: (jobacct_gather's OverMemoryKill: "StepId=1.0 exceeded memory limit (382435328 >
#: 314572800), being killed"; the job then ends FAILED 137, not OUT_OF_MEMORY, which 22.05
#: sets only from task/cgroup's OOM notification)
MEMORY_KILL = re.compile(r"(?:StepId=|step )\S+ exceeded memory limit \(\d+ > \d+\)")


def memory_kill(output: str) -> str | None:
    """slurmstepd's words when it killed a step of the job over its memory limit, else None."""
    found = MEMORY_KILL.search(output)
    return found.group(0) if found else None


def parse_duration(text: str) -> timedelta:
    """Slurm's `[D-][HH:]MM:SS` as a timedelta (0 for anything else)."""
    days, _, clock = text.rpartition("-") if "-" in text else ("0", "", text)
    parts = [_int(p) for p in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    hours, minutes, seconds = parts[-3:]
    return timedelta(days=_int(days), hours=hours, minutes=minutes, seconds=seconds)


def parse_scontrol_nodes(text: str) -> list[SlurmNode]:
    """Nodes of `scontrol show node --oneliner` (one `Key=Value ...` line each)."""
    return [
        SlurmNode(
            name=fields["NodeName"],
            state=fields.get("State", "UNKNOWN"),
            cpus=_int(fields.get("CPUTot", "0")),
            cpus_allocated=_int(fields.get("CPUAlloc", "0")),
            gres=_none(fields.get("Gres", "")),
            partitions=tuple(p for p in fields.get("Partitions", "").split(",") if p),
            reason=_none(fields.get("Reason", "")),
            tres=parse_tres(fields.get("CfgTRES", "")),
        )
        for fields in _oneliner_records(text, "NodeName")
    ]


def _oneliner_records(text: str, first_key: str) -> list[dict[str, str]]:
    """The records of `scontrol show <entity> --oneliner`: each line that opens `first_key=`."""
    return [_key_values(line) for line in text.splitlines() if line.startswith(f"{first_key}=")]


def _key_values(line: str) -> dict[str, str]:
    """`A=1 B=x y C=2` → {A: 1, B: "x y", C: 2}: a value runs until the next ` Key=`."""
    fields: dict[str, str] = {}
    key: str | None = None
    for token in line.split(" "):
        head, sep, value = token.partition("=")
        if sep and head and head[0].isupper() and head.replace("/", "").replace(":", "").isalnum():
            key = head
            fields[key] = value
        elif key is not None and token:
            fields[key] = f"{fields[key]} {token}"
    return fields


def base_state(state: str) -> str:
    """`CANCELLED by 0` → CANCELLED; `COMPLETED+` → COMPLETED (sacct's decorations)."""
    return state.split(" ")[0].rstrip("+").upper()


def parse_tres(text: str) -> dict[str, str]:
    """`cpu=2,mem=1M,node=1,gres/gpu=4` → {"cpu": "2", ...}; empty for '' and N/A."""
    if not text or text in ("N/A", "(null)"):
        return {}
    pairs = (item.partition("=") for item in text.split(",") if "=" in item)
    return {key: value for key, _, value in pairs}


def expand_hostlist(text: str) -> tuple[str, ...]:
    """Slurm's compressed host list (`gpu[01-03,07],cpu1`) as host names."""
    if not text or text in ("(null)", "None assigned", "N/A"):
        return ()
    hosts: list[str] = []
    for part in _split_top_level(text):
        if "[" not in part:
            hosts.append(part)
            continue
        prefix, _, rest = part.partition("[")
        ranges, _, suffix = rest.partition("]")
        for item in ranges.split(","):
            low, dash, high = item.partition("-")
            if not dash:
                hosts.append(f"{prefix}{low}{suffix}")
                continue
            width = len(low)
            hosts.extend(f"{prefix}{n:0{width}d}{suffix}" for n in range(int(low), int(high) + 1))
    return tuple(hosts)


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside brackets and parentheses (`h[1,3],h5`; `gpu:2(S:0,1),mps:4`)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += char in "[("
        depth -= char in "])"
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p]


def _tres_count(value: str | None) -> float:
    if not value:
        return 0.0
    digits = value.rstrip("KMGTP")
    try:
        return float(digits)
    except ValueError:
        return 0.0


def _exit_code(text: str) -> tuple[int, int]:
    code, _, signal = text.partition(":")
    return _int(code), _int(signal)


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def _none(text: str) -> str | None:
    return None if text in ("", "None", "(null)", "N/A") else text
