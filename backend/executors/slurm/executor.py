"""The Slurm executor: every attempt is one Slurm job; Slurm queues, allocates and places it.

`place` hands Slurm every queued job that Trainboard's quotas let through (Slurm's own
priority, fair share, limits and preemption decide when it runs); each node of a gang is a
slice named `slurm-<rank>`, a slot the supervisor that Slurm starts on the allocation's
rank-th node claims through the node routes with that slot's node token. `start` submits
one `sbatch` per attempt whose script runs one supervisor per node with `srun`
(workers/node/slurm_step.py). `observe` reads the deployment's jobs with one `squeue` per
POLL_SECONDS: Slurm's pending reason becomes the job's wait reason, and an attempt whose
Slurm job left the queue without its supervisors' report is ended with Slurm's state.
`stop` asks the supervisors through the same control key as the node pool (they checkpoint
and stop), and a Slurm job still there after the grace is `scancel`led.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import redis
from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.auth.service import authenticate, ensure_admin, issue_token
from backend.db import as_utc, utcnow
from backend.deployment_keys import keys_of
from backend.executors.slurm.cli import (
    AccountedJob,
    BatchRequest,
    QueuedJob,
    SlurmCli,
    SlurmError,
    SlurmNode,
    SlurmUnreachable,
    gpu_option,
    memory_kill,
)
from backend.executors.slurm.states import ACTIVE, PENDING, TERMINAL, ended, wait_reason
from backend.jobs.attempt_end import end_attempt
from backend.jobs.attempt_states import LIVE_ATTEMPT_VALUES, AttemptState
from backend.jobs.cluster import publish_manager
from backend.jobs.models import Attempt, Job
from backend.nodes.models import Device, Node, NodeState
from backend.nodes.schemas import ManagerNodeOut, ManagerOut
from backend.placement.policy import NodeCapacity, Placement, Plan, Quota, plan
from backend.placement.policy import QueuedJob as QueuedForPlacement
from backend.placement.preemption import RunningJob
from backend.signals import request_stops
from backend.usage.models import AllocationStart, SlurmUsage
from workers.contract.oom import OOM_PREFIX
from workers.contract.protocol import AttemptOrder, StopRequest

log = logging.getLogger(__name__)

#: the slice (node) name of a gang's rank-th Slurm node
SLOT_PREFIX = "slurm-"
#: squeue at most this often for all of the deployment's jobs together
POLL_SECONDS = 1.0
#: Slurm's node list is read this often (`scontrol show node`) for the cluster page
NODES_SECONDS = 10.0
#: the slot nodes follow Slurm's node list this often
SYNC_SECONDS = 60.0
#: sacct is asked about ended attempts' Slurm jobs at most this often (each once, on its end)
ACCOUNT_SECONDS = 10.0
#: how many ended attempts one sacct call asks about
ACCOUNT_BATCH = 200
#: an ended attempt whose Slurm job accounting has not recorded after this is left out
ACCOUNT_GIVE_UP = timedelta(minutes=10)
#: how much of the end of a Slurm job's output is read for slurmstepd's memory kill
OUTPUT_TAIL = 64 * 1024
#: the token name of every slot's node token
SLOT_TOKEN_NAME = "slurm slot"
#: a Slurm job of no live attempt (its attempt ended) still running after this is scancelled
ORPHAN_GRACE = 30.0
#: a stopped attempt's Slurm job still running this long after its supervisors' own grace
#: ran out (SIGTERM, then SIGKILL of the ranks) is scancelled: time to report and exit
REPORT_MARGIN = 20.0
#: each stop's supervisor grace: the setting handed to the steps and its default there
#: (workers/node/settings.py; tests/executors/test_slurm_parsers.py checks that they agree)
SUPERVISOR_GRACE = {
    StopRequest.cancel: ("TRAINBOARD_STOP_GRACE_SECONDS", 10.0),
    StopRequest.pause: ("TRAINBOARD_STOP_GRACE_SECONDS", 10.0),
    StopRequest.preempt: ("TRAINBOARD_PREEMPT_GRACE_SECONDS", 60.0),
}
#: the environment a step must never get (the database, other secrets of the control plane)
WITHHELD = frozenset(
    {
        "TRAINBOARD_DATABASE_URL",
        "TRAINBOARD_ADMIN_TOKEN",
        "TRAINBOARD_NODE_TOKEN",
        "TRAINBOARD_NODE_NAME",
        "TRAINBOARD_TOKEN",
    }
)
REPO_ROOT = Path(__file__).resolve().parents[3]


def slot(rank: int) -> str:
    """The node name of a gang's rank-th Slurm node."""
    return f"{SLOT_PREFIX}{rank}"


@dataclass
class _Stopping:
    """A stop asked of a running attempt: scancel it if its Slurm job is still there after."""

    deadline: float


class SlurmExecutor:
    """Runs each attempt as one Slurm job on the cluster `cli` reaches."""

    name = "slurm"

    def __init__(
        self,
        *,
        client: redis.Redis,
        cli: SlurmCli,
        data_dir: Path,
        api_url: str,
        partition: str | None = None,
        gpus: bool | None = None,
        step_env: Mapping[str, str] | None = None,
        stop_grace: float | None = None,
        submit_timeout: float = 60.0,
        python: str = sys.executable,
    ) -> None:
        self.client = client
        self.cli = cli
        self.data_dir = data_dir.resolve()
        self.api_url = api_url
        self.partition = partition or None
        #: what the operator asked: GPUs (True), CPUs (False), or None: GPUs when the
        #: partition's nodes have any (Gres/CfgTRES), decided at each read of the nodes
        self.gpus_asked = gpus
        self.gpus = bool(gpus)
        #: seconds from a stop request to scancel; None: the supervisors' grace + margin
        self.stop_grace = stop_grace
        self.submit_timeout = timedelta(seconds=submit_timeout)
        self.python = python
        self.keys = keys_of(client)
        self.prefix = f"tb-{self.keys.deployment or 'default'}-"
        source = os.environ if step_env is None else step_env
        self.step_env = {
            k: v for k, v in source.items() if k.startswith("TRAINBOARD_") and k not in WITHHELD
        }
        #: "Slurm unreachable: ..." while the controller does not answer, else None
        self.unreachable: str | None = None
        self._polled_at = float("-inf")
        self._submitted: dict[int, str] = {}  # attempt id: Slurm job id, not stored yet
        self._refused: dict[int, str] = {}  # attempt id: why sbatch refused it
        #: attempt id: its sbatch, not answered (the controller unreachable): sent again
        #: once squeue answers and shows no job of that name
        self._unsent: dict[int, BatchRequest] = {}
        self._stopping: dict[int, _Stopping] = {}  # attempt id: when to scancel
        self._orphans: dict[str, float] = {}  # Slurm job id of no live attempt: first seen
        self._slots: set[str] = set()
        self._synced_at = float("-inf")
        self._nodes_at = float("-inf")
        self._nodes: list[SlurmNode] = []  # as last read
        #: why sacct cannot be read (no accounting storage), once it said so; else None
        self.accounting_off: str | None = None
        self._accounted_at = float("-inf")
        self._unaccounted: set[int] = set()  # attempt ids accounting never recorded
        self._started: set[int] = set()  # live attempt ids whose allocation start is stored

    # -- the Executor protocol -------------------------------------------------------------

    def observe(self, session: Session) -> set[int]:
        """Slurm's wait reasons onto the board; attempts whose Slurm job ended unreported end."""
        # the ids sbatch gave, at the first pass after it (not only once a second): a job
        # Slurm starts at once is claimed within a second, and its attempt shows its id
        self._store_ids(session)
        now = time.monotonic()
        if now - self._polled_at < POLL_SECONDS:
            return set()
        self._polled_at = now
        try:
            queue = self.cli.queue(self.prefix)
        except SlurmUnreachable as err:  # running jobs go on; nothing is decided blind
            if self.unreachable is None:
                log.warning("Slurm unreachable: %s", err)
            self.unreachable = f"Slurm unreachable: {err}"
            if now - self._nodes_at >= NODES_SECONDS:  # the page says so, nodes as last seen
                self._nodes_at = now
                self._publish_nodes({})
            return self._say_unreachable(session)
        self.unreachable = None
        by_attempt = {_attempt_of(job.name): job for job in queue.values()}
        live = session.scalars(
            select(Attempt).where(
                Attempt.state.in_(LIVE_ATTEMPT_VALUES), Attempt.node_name.like(f"{SLOT_PREFIX}%")
            )
        ).all()
        if now - self._nodes_at >= NODES_SECONDS:
            self._nodes_at = now
            self._read_nodes(session, now, live, by_attempt)
        self._record_starts(session, live, by_attempt)
        changed: set[int] = set()
        for attempt in live:
            if self._observe_attempt(session, attempt, by_attempt.get(attempt.id), now):
                changed.add(attempt.job_id)
        self._cancel_orphans({a.id for a in live}, by_attempt, now)
        self._stopping = {k: v for k, v in self._stopping.items() if k in by_attempt}
        self._account(session, set(queue), now)
        return changed

    def quiet_until(self, session: Session) -> datetime | None:
        """Now: Slurm is polled (its nodes for the cluster page too) at every pass."""
        return utcnow()

    def still_listening(self) -> None:
        """Nothing to note: no pass is skipped (`quiet_until`)."""

    def place(
        self,
        session: Session,
        queue: Sequence[QueuedForPlacement],
        *,
        running: Sequence[RunningJob],
        quotas: dict[int, Quota],
    ) -> Plan:
        """Every queued job the owner's quota allows goes to Slurm now; Slurm orders them."""
        if not queue:
            return Plan()
        if self.unreachable is not None:  # nothing is submitted blind
            return Plan(waiting={job.id: self.unreachable for job in queue})
        # one unbounded virtual node per rank: the policy applies quotas (and nothing else:
        # no running jobs, so no preemption of Trainboard's own; Slurm preempts)
        room = tuple(range(sum(job.devices for job in queue)))
        widest = max(job.nodes for job in queue)
        nodes = [NodeCapacity(slot(r), len(room), room) for r in range(widest)]
        decided = plan(queue, nodes, quotas=quotas)
        shapes = {job.id: job for job in queue}
        placements = []
        for placed in decided.placements:
            job = shapes[placed.job_id]
            devices = tuple(range(job.per_node))  # Slurm numbers each node's devices from 0
            slices = tuple((slot(r), devices) for r in range(job.nodes))
            placements.append(Placement(job.id, slices))
        if placements:
            self._ensure_slots(session, max(len(p.slices) for p in placements))
        return Plan(placements=placements, waiting=decided.waiting)

    def address_of(self, session: Session, node: str) -> str:
        """ "" : each step learns rank 0's host from its allocation (workers/node/slurm_step)."""
        return ""

    def start(self, orders: Sequence[AttemptOrder]) -> None:
        """One sbatch per attempt; its script runs one supervisor per node under srun."""
        gangs: dict[int, list[AttemptOrder]] = {}
        for order in orders:
            gangs.setdefault(order.attempt_id, []).append(order)
        for attempt_id, gang in gangs.items():
            gang.sort(key=lambda o: o.node_rank)
            self._submit(attempt_id, self._request(gang))

    def _submit(self, attempt_id: int, request: BatchRequest) -> None:
        self._unsent.pop(attempt_id, None)
        try:
            self._submitted[attempt_id] = self.cli.submit(request)
        except SlurmUnreachable as err:  # it may or may not have arrived: observe looks
            log.warning("attempt %d: sbatch unanswered: %s", attempt_id, err)
            self._unsent[attempt_id] = request
        except SlurmError as err:  # observe ends it (not the job's fault)
            log.warning("attempt %d: sbatch failed: %s", attempt_id, err)
            self._refused[attempt_id] = str(err)

    def stop(self, attempt_ids: Sequence[int], action: StopRequest) -> None:
        """The supervisors checkpoint and stop (control key); scancel after the grace."""
        request_stops(self.client, attempt_ids=attempt_ids, action=action)
        deadline = time.monotonic() + self.grace(action)
        for attempt_id in attempt_ids:
            self._stopping.setdefault(attempt_id, _Stopping(deadline))

    def grace(self, action: StopRequest) -> float:
        """Seconds from a stop request until its Slurm job, if still running, is scancelled:
        after the grace its supervisors give the ranks' final checkpoint (the setting this
        executor hands them), so a scancel never cuts a save they still allow."""
        if self.stop_grace is not None:
            return self.stop_grace
        setting, default = SUPERVISOR_GRACE[action]
        try:
            supervisors = float(self.step_env.get(setting, default))
        except ValueError:  # the steps refuse it too (their settings fail to load)
            supervisors = default
        return supervisors + REPORT_MARGIN

    # -- the parts -------------------------------------------------------------------------

    def job_name(self, order: AttemptOrder) -> str:
        """`tb-<deployment>-<job>-<attempt id>`: squeue finds the deployment's jobs by prefix."""
        return f"{self.prefix}{order.job_id}-{order.attempt_id}"

    def step_dir(self, attempt_id: int) -> Path:
        """Where an attempt's orders, step settings and Slurm output lie (0700)."""
        return self.data_dir / "slurm" / f"attempt-{attempt_id}"

    def token_file(self, node: str) -> Path:
        return self.data_dir / "slurm" / "tokens" / node

    def _request(self, gang: list[AttemptOrder]) -> BatchRequest:
        first = gang[0]
        folder = self.step_dir(first.attempt_id)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        step = {
            "orders": [o.model_dump(mode="json") for o in gang],
            "tokens": {o.node: str(self.token_file(o.node)) for o in gang},
            "env": {
                **self.step_env,
                "TRAINBOARD_API_URL": self.api_url,
                "TRAINBOARD_DATA_DIR": str(self.data_dir),
                "TRAINBOARD_CPU_SLOTS": str(len(first.devices)),
            },
        }
        _write_private(folder / "step.json", json.dumps(step))
        per_node = len(first.devices)
        cpus = 1 if self.gpus else per_node
        gpus = f" {gpu_option(per_node)}" if self.gpus else ""
        # the batch shell runs on the allocation's first node: rank 0's host is its own name
        script = f"""#!/bin/bash
export TRAINBOARD_SLURM_MASTER="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
cd {shlex.quote(str(REPO_ROOT))}
exec srun --nodes={len(gang)} --ntasks-per-node=1 --cpus-per-task={cpus}{gpus} \\
    --kill-on-bad-exit=0 --export=ALL \\
    {shlex.quote(self.python)} -m workers.node.slurm_step {shlex.quote(str(folder))}
"""
        return BatchRequest(
            name=self.job_name(first),
            script=script,
            nodes=len(gang),
            cpus_per_task=cpus,
            gpus_per_node=per_node if self.gpus else 0,
            partition=self.partition,
            output=str(folder / "slurm-%j.out"),
            extra=(f"--chdir={REPO_ROOT}",),
        )

    def _read_nodes(
        self,
        session: Session,
        now: float,
        live: Sequence[Attempt],
        by_attempt: Mapping[int | None, QueuedJob],
    ) -> None:
        """Slurm's nodes: onto the cluster page (with the Trainboard jobs running on each),
        and every SYNC_SECONDS into the slot nodes."""
        try:
            self._nodes = self.cli.nodes()
        except SlurmError as err:
            log.warning("Slurm's nodes unknown: %s", err)
            return
        self._decide_gpus(self._nodes)
        jobs_on: dict[str, set[int]] = {}
        for attempt in live:
            queued = by_attempt.get(attempt.id)
            if queued is not None and queued.state in ACTIVE:
                for host in queued.nodes:
                    jobs_on.setdefault(host, set()).add(attempt.job_id)
        self._publish_nodes(jobs_on)
        if now - self._synced_at >= SYNC_SECONDS:
            self._sync_slots(session, self._nodes)
            self._synced_at = now

    def _decide_gpus(self, nodes: Sequence[SlurmNode]) -> None:
        """Unless the operator said, GPUs are the devices when the partition has any."""
        if self.gpus_asked is not None:
            return
        found = any(n.gpus for n in nodes if self.partition in (None, *n.partitions))
        if found != self.gpus:
            log.info(
                "Slurm's partition has %s: each device is a %s",
                *(
                    ("GPUs", "GPU (--gres=gpu:N)")
                    if found
                    else ("no GPUs", "CPU (--cpus-per-task)")
                ),
            )
            self.gpus = found

    def _publish_nodes(self, jobs_on: Mapping[str, set[int]]) -> None:
        view = ManagerOut(
            manager="slurm",
            observed_at=utcnow(),
            unreachable=self.unreachable,
            nodes=manager_nodes(self._nodes, jobs_on, partition=self.partition),
        )
        publish_manager(self.client, view)

    def _sync_slots(self, session: Session, found: Sequence[SlurmNode]) -> None:
        """One slot node per Slurm node of the partition, largest first, with its devices
        (CPUs, or GPUs in GPU mode): the submission's could-ever-fit check reads them."""
        sizes = sorted(
            (
                n.gpus if self.gpus else n.cpus
                for n in found
                if self.partition is None or self.partition in n.partitions
            ),
            reverse=True,
        )
        kind = "gpu" if self.gpus else "cpu"
        for rank, size in enumerate(sizes):
            node = self._slot_node(session, slot(rank))
            if [d.index for d in node.devices] != list(range(size)):
                node.devices = [
                    Device(index=i, kind=kind, name=f"Slurm {kind.upper()}") for i in range(size)
                ]
        self._ensure_slots(session, len(sizes))

    def _slot_node(self, session: Session, name: str) -> Node:
        node = session.scalars(select(Node).where(Node.name == name)).first()
        if node is None:
            node = Node(name=name, hostname="slurm", address="", storage="slurm")
            session.add(node)
        return node

    def _ensure_slots(self, session: Session, count: int) -> None:
        """Slot nodes slurm-0..count-1 exist, up, with a node token each in the data dir."""
        for rank in range(count):
            name = slot(rank)
            if name in self._slots:
                continue
            node = self._slot_node(session, name)
            node.state, node.state_reason = NodeState.up, None
            node.data_dir = str(self.data_dir)  # checkpoints are accepted under it
            path = self.token_file(name)
            known = path.read_text().strip() if path.exists() else ""
            principal = authenticate(session, known) if known else None
            if principal is None or principal.node != name:
                _, secret = issue_token(
                    session,
                    user=ensure_admin(session),
                    scopes="node",
                    name=SLOT_TOKEN_NAME,
                    node=name,
                )
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                _write_private(path, secret)
            self._slots.add(name)

    def _say_unreachable(self, session: Session) -> set[int]:
        """Jobs Slurm holds pending say so on the board while the controller is away."""
        reason = self.unreachable
        rows = session.execute(
            select(Job)
            .join(Attempt, (Attempt.job_id == Job.id) & (Attempt.number == Job.attempt))
            .where(
                Attempt.state == AttemptState.scheduled,
                Attempt.node_name.like(f"{SLOT_PREFIX}%"),
            )
        ).scalars()
        changed = set()
        for job in rows:
            if job.wait_reason != reason:
                job.wait_reason = reason
                changed.add(job.id)
        return changed

    def _store_ids(self, session: Session) -> None:
        """The Slurm job ids `start` got, onto their attempts (ended ones too: a short job
        may have finished before this pass)."""
        submitted, self._submitted = self._submitted, {}
        for attempt_id, slurm_id in submitted.items():
            attempt = session.get(Attempt, attempt_id)
            if attempt is not None and attempt.slurm_job_id is None:
                attempt.slurm_job_id = slurm_id

    def _record_starts(
        self, session: Session, live: Sequence[Attempt], by_attempt: Mapping[int | None, QueuedJob]
    ) -> None:
        """Each live attempt's allocation start, the first time squeue shows its Slurm job
        holding its allocation: its devices are the user's from then (usage counts from it,
        as sacct does), a few seconds before the supervisor's claim."""
        found = {
            a.id: queued.start
            for a in live
            if a.id not in self._started
            and (queued := by_attempt.get(a.id)) is not None
            and queued.state in ACTIVE
            and queued.start is not None
            and queued.job_id == a.slurm_job_id
        }
        self._started &= {a.id for a in live}
        if not found:
            return
        known = session.scalars(
            select(AllocationStart.attempt_id).where(AllocationStart.attempt_id.in_(found))
        ).all()
        for attempt_id, start in found.items():
            if attempt_id not in known:
                session.add(AllocationStart(attempt_id=attempt_id, started_at=start))
        self._started |= set(found)

    def _observe_attempt(
        self, session: Session, attempt: Attempt, queued: QueuedJob | None, now: float
    ) -> bool:
        """One live attempt against what squeue shows of it; whether its job changed."""
        job = session.get_one(Job, attempt.job_id)
        if attempt.slurm_job_id is None:
            known = queued and queued.job_id  # submitted, but its id not stored (a restart)
            if known:
                attempt.slurm_job_id = known
                self._unsent.pop(attempt.id, None)
            elif attempt.id in self._unsent:  # not in the queue: it never arrived
                self._submit(attempt.id, self._unsent[attempt.id])
                return False
            elif attempt.id in self._refused:
                why = self._refused.pop(attempt.id)
                return self._end(session, attempt, AttemptState.withdrawn, f"sbatch: {why}", True)
            elif as_utc(attempt.created_at) < utcnow() - self.submit_timeout:
                why = "its Slurm job was never submitted (the control plane restarted?)"
                return self._end(session, attempt, AttemptState.withdrawn, why, True)
            else:
                return False
        slurm_id = attempt.slurm_job_id
        current = job.attempt == attempt.number
        if queued is not None and queued.restarts > 0 and queued.state not in TERMINAL:
            # requeued behind Trainboard's back (an operator's `scontrol requeue`): the run is
            # fenced (its step refuses restart > 0); Trainboard owns restarts, so it ends
            self._scancel(slurm_id, f"requeued by Slurm (restart {queued.restarts})")
        if queued is not None and queued.state not in TERMINAL:
            stopping = self._stopping.get(attempt.id)
            if stopping is None and current and job.stop_request is not None:
                # a cancel or pause reaches the supervisors through the control key (the jobs
                # service sets it, not `stop`): their grace runs from when it is first seen
                action = StopRequest(job.stop_request)
                stopping = self._stopping[attempt.id] = _Stopping(now + self.grace(action))
            if stopping is not None and now >= stopping.deadline:
                self._scancel(slurm_id, f"attempt {attempt.id} did not stop within the grace")
            reason = None
            if queued.state in PENDING:
                reason = f"Slurm job {slurm_id}: {wait_reason(queued.reason)}"
            if current and job.wait_reason != reason and (reason or _ours(job.wait_reason)):
                job.wait_reason = reason
                return True
            return False
        record = self._record(slurm_id)
        if record is None or record.state in PENDING | ACTIVE:
            return False  # not ended yet, or Slurm does not answer: look again
        lost: tuple[str, ...] = ()
        if record.state in ("FAILED", "CANCELLED", "NODE_FAIL"):
            try:
                lost = tuple(n.name for n in self.cli.nodes() if n.lost and n.name in record.nodes)
            except SlurmError:
                lost = ()
        end = ended(
            record.state,
            exit_code=record.exit_code,
            signal=record.signal,
            reason=record.reason,
            lost_nodes=lost,
            memory_kill=self._memory_kill(attempt.id, slurm_id, record.state),
        )
        reason = f"Slurm job {slurm_id} ended without its supervisors' report: {end.reason}"
        if end.out_of_memory:  # the job's OOM rules (health.on_oom) read this prefix
            reason = f"{OOM_PREFIX}: {reason}"
        if attempt.state == AttemptState.scheduled:
            state = AttemptState.withdrawn  # it never ran a rank
        elif end.platform_fault and not end.preempted:
            state = AttemptState.lost
        elif end.outcome == "stopped":
            state = AttemptState.stopped
        else:
            state = AttemptState.failed  # COMPLETED unreported: the supervisors never said
        fault = end.platform_fault or end.outcome == "succeeded"
        self._stopping.pop(attempt.id, None)
        return self._end(session, attempt, state, reason, fault)

    def _memory_kill(self, attempt_id: int, slurm_id: str, state: str) -> str | None:
        """slurmstepd's memory kill in a FAILED or CANCELLED job's output (the end of it,
        where the kill is written last), if any."""
        if state.split(" ")[0] not in ("FAILED", "CANCELLED"):
            return None
        path = self.step_dir(attempt_id) / f"slurm-{slurm_id}.out"
        try:
            with path.open("rb") as out:
                out.seek(max(0, path.stat().st_size - OUTPUT_TAIL))
                return memory_kill(out.read().decode(errors="replace"))
        except OSError:
            return None

    def _account(self, session: Session, queued: set[str], now: float) -> None:
        """sacct's allocation of each ended attempt's Slurm job, read once it has left the
        queue, into slurm_usage (the usage view shows it beside Trainboard's own figure)."""
        if self.accounting_off is not None or now - self._accounted_at < ACCOUNT_SECONDS:
            return
        rows = session.execute(
            select(Attempt.id, Attempt.slurm_job_id, Attempt.finished_at)
            .outerjoin(SlurmUsage, SlurmUsage.attempt_id == Attempt.id)
            .where(
                Attempt.slurm_job_id.is_not(None),
                Attempt.finished_at.is_not(None),
                SlurmUsage.attempt_id.is_(None),
                Attempt.id.not_in(self._unaccounted or {0}),
            )
            .order_by(Attempt.id)
            .limit(ACCOUNT_BATCH)
        ).all()
        todo = {str(slurm): (a, at) for a, slurm, at in rows if slurm and slurm not in queued}
        if not todo:
            return
        self._accounted_at = now
        try:
            found = self.cli.accounting_runs(todo)
        except SlurmUnreachable:
            return
        except SlurmError as err:
            if "disabled" in str(err).lower():  # "Slurm accounting storage is disabled"
                self.accounting_off = str(err)
                log.warning("Slurm has no accounting; usage shows Trainboard's only: %s", err)
            else:  # slurmdbd busy or restarting: asked again in ACCOUNT_SECONDS
                log.warning("sacct failed: %s", err)
            return
        resource = "gres/gpu" if self.gpus else "cpu"
        for slurm_id, (attempt_id, finished) in todo.items():
            runs = found.get(slurm_id)
            if not runs or runs[-1].state in PENDING | ACTIVE:  # slurmdbd has not its end yet
                if finished is not None and as_utc(finished) < utcnow() - ACCOUNT_GIVE_UP:
                    self._unaccounted.add(attempt_id)
                continue
            session.add(
                SlurmUsage(
                    attempt_id=attempt_id,
                    slurm_job_id=slurm_id,
                    state=runs[-1].state,
                    runs=len(runs),
                    elapsed_seconds=sum(r.elapsed.total_seconds() for r in runs),
                    allocated_device_seconds=sum(r.allocated(resource) for r in runs) * 3600,
                )
            )

    def _end(
        self, session: Session, attempt: Attempt, state: AttemptState, reason: str, fault: bool
    ) -> bool:
        log.info("attempt %d: %s (%s)", attempt.id, state.value, reason)
        end_attempt(session, self.client, attempt, state=state, reason=reason, platform_fault=fault)
        return True

    def _record(self, slurm_id: str) -> AccountedJob | None:
        """How a job that left the queue ended: the controller's record, else accounting."""
        try:
            found = self.cli.job(slurm_id)
            if found is None:
                found = self.cli.accounting([slurm_id]).get(slurm_id)
        except SlurmUnreachable:
            return None
        except SlurmError as err:  # no accounting storage, and the controller forgot it
            log.warning("Slurm job %s: no record of how it ended: %s", slurm_id, err)
            found = None
        return found or _forgotten(slurm_id)

    def _cancel_orphans(
        self, live: set[int], by_attempt: dict[int | None, QueuedJob], now: float
    ) -> None:
        """A Slurm job of this deployment whose attempt ended: at once while it waits, else
        after the grace its supervisors get to report and stop."""
        seen = set()
        for attempt_id, queued in by_attempt.items():
            if attempt_id in live or queued.state in TERMINAL:
                continue
            seen.add(queued.job_id)
            first = self._orphans.setdefault(queued.job_id, now)
            if queued.state in PENDING or now - first >= ORPHAN_GRACE:
                self._scancel(queued.job_id, f"its attempt {attempt_id} has ended")
        self._orphans = {k: v for k, v in self._orphans.items() if k in seen}

    def _scancel(self, slurm_id: str, why: str) -> None:
        log.info("scancel %s: %s", slurm_id, why)
        try:
            self.cli.cancel(slurm_id)
        except SlurmError as err:
            log.warning("scancel %s failed: %s", slurm_id, err)


def manager_nodes(
    nodes: Sequence[SlurmNode], jobs_on: Mapping[str, set[int]], *, partition: str | None = None
) -> list[ManagerNodeOut]:
    """Slurm's nodes as the cluster page shows them (those of the partition, if one is set),
    each with the Trainboard jobs that have a rank there."""
    return [
        ManagerNodeOut(
            name=n.name,
            state=n.state,
            health=n.health,
            reason=n.reason,
            cpus=n.cpus,
            cpus_allocated=n.cpus_allocated,
            gpus=n.gpus,
            partitions=list(n.partitions),
            jobs=sorted(jobs_on.get(n.name, ())),
        )
        for n in nodes
        if partition is None or partition in n.partitions
    ]


def _attempt_of(name: str) -> int | None:
    """The attempt id at the end of a job name `tb-<deployment>-<job>-<attempt>`."""
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _forgotten(slurm_id: str) -> AccountedJob:
    """A job neither the controller (past MinJobAge) nor accounting remembers: failed."""
    return AccountedJob(
        job_id=slurm_id,
        name="",
        state="FAILED",
        exit_code=0,
        signal=0,
        reason="Slurm kept no record of how it ended",
        restarts=0,
        elapsed=timedelta(),
        tres={},
        nodes=(),
        partition="",
    )


def _ours(reason: str | None) -> bool:
    return bool(reason) and str(reason).startswith(("Slurm job ", "Slurm unreachable"))


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner reads (a token, a step's orders and settings)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
