"""One node's supervisor of an attempt that Slurm runs (`srun ... -m workers.node.slurm_step DIR`).

The Slurm executor (backend/executors/slurm/executor.py) writes DIR/step.json (0600): the
gang's orders by node rank, each slot's token file and the worker settings, then submits
one batch job whose `srun` starts this once per node. Here the node rank is SLURM_NODEID
and rank 0's host the allocation's first (TRAINBOARD_SLURM_MASTER, set by the batch
script); the rest is a node agent's `run_attempt`: claim the slot's slice through the API,
run the ranks under a Supervisor, report the outcome. SIGTERM (scancel, the time limit)
stops the ranks, which checkpoint if they can, and the outcome is still reported (Slurm's
time limit by name: the controller's record of the job then reads `Reason=TimeLimit`). Its
devices (CPU slots, or the GPUs the allocation shows) are sampled under the slot's name
while it runs, attributed to the attempt's ranks, as a node agent samples its own.

Slurm's preemption (docs/slurm.md): Trainboard owns restarts. Its jobs are submitted
`--no-requeue`, so a preempted one is not requeued by Slurm but ended after the partition's
GraceTime; the SIGTERM that opens the grace reaches this step and the ranks alike. The step
asks the controller whether its job was picked for preemption (`PreemptTime` set); if so
the ranks checkpoint and the attempt is reported as a platform stop ("preempted by
Slurm"), which spends no restart: Trainboard queues the job again, submits a new Slurm job
and the new attempt resumes from that checkpoint. A run with SLURM_RESTART_COUNT > 0 (an
operator's `scontrol requeue`) is not the attempt's: it exits without claiming anything,
so an attempt is only ever run by (its Slurm job id, restart 0).
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from workers.contract.keys import Keys
from workers.contract.protocol import DEVICES_STREAM
from workers.devices import DeviceProbe
from workers.devices.host import HostProbe
from workers.devices.nvml import NvmlProbe
from workers.devices.registry import DeviceRegistry
from workers.devices.sampler import DeviceSampler
from workers.node.api_client import NodeApiClient
from workers.node.settings import WorkerSettings
from workers.node.tasks import ActiveAttempts, run_attempt
from workers.supervisor.job_user import IsolationError
from workers.telemetry import StreamPublisher, producer_name

log = logging.getLogger("workers.node.slurm_step")

#: what run_attempt returns when it reported an outcome to the API
REPORTED = frozenset({"succeeded", "failed", "stopped"})
#: how long a SIGTERM's cause is asked of the controller: it is busy ending the job then, and
#: a second SIGTERM (srun's) kills a scontrol that the first one's read had started
RECORD_SECONDS = 15.0
#: `scontrol show job`'s PreemptTime: set once the job was picked for preemption
PREEMPT_TIME = re.compile(r"(?:^|\s)PreemptTime=(\S+)")
#: `scontrol show job`'s reason once the job reached its time limit, and that limit
TIME_LIMIT_REASON = re.compile(r"(?:^|\s)Reason=(TimeLimit|DeadLine)(?:\s|$)")
TIME_LIMIT = re.compile(r"(?:^|\s)TimeLimit=(\S+)")


def job_record(job_id: str, *, timeout: float = RECORD_SECONDS) -> str:
    """This job's `scontrol show job --oneliner` line, or "" (no job id, or the controller
    did not say within the timeout: a SIGTERM then reads as before). Asked again until the
    timeout when a read brings nothing: the controller is busy ending the job, and Slurm's
    next SIGTERM to the step's processes kills a scontrol running then."""
    if not job_id:
        return ""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            out = subprocess.run(
                ["scontrol", "show", "job", "--oneliner", job_id],
                capture_output=True,
                text=True,
                timeout=left,
                check=False,
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            return ""
        if out.strip():
            return out
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
    return ""


def preempted(
    job_id: str, *, timeout: float = RECORD_SECONDS, record: str | None = None
) -> str | None:
    """When Slurm picked this job for preemption (its PreemptTime), or None: not picked,
    or the controller did not say (`record`: the job's scontrol line, if already read)."""
    text = job_record(job_id, timeout=timeout) if record is None else record
    found = PREEMPT_TIME.search(text)
    value = found.group(1) if found else None
    return None if value in (None, "None", "Unknown", "(null)", "N/A") else value


def timed_out(job_id: str, record: str) -> str | None:
    """Why Slurm ends this job when it reached its time limit (its scontrol line reads
    `Reason=TimeLimit` from the SIGTERM on: JobState COMPLETING, then TIMEOUT), else None.
    The job's own doing: its attempt fails with this reason (a restart is spent)."""
    reason = TIME_LIMIT_REASON.search(record)
    if reason is None:
        return None
    if reason.group(1) == "DeadLine":
        return f"Slurm: DEADLINE: Slurm job {job_id} reached its deadline"
    found = TIME_LIMIT.search(record)
    limit = f" (TimeLimit={found.group(1)})" if found else ""
    return f"Slurm: TIMEOUT: Slurm job {job_id} reached its time limit{limit}"


def step_order(step: dict[str, Any], node_id: int, master: str) -> dict[str, Any]:
    """This node's order: the rank-th of the gang, with rank 0's host from the allocation."""
    order = dict(step["orders"][node_id])
    if order["node_rank"] != node_id:
        raise ValueError(f"order {node_id} is for node rank {order['node_rank']}")
    return {**order, "master_addr": master or order.get("master_addr") or "127.0.0.1"}


def main(argv: list[str] | None = None) -> int:
    """Run this node's slice of the attempt in the folder given; 0 once its end is reported."""
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    slurm_job = os.environ.get("SLURM_JOB_ID", "")
    restarts = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
    if restarts > 0:  # fenced: only (job id, restart 0) runs the attempt; Trainboard restarts
        log.error(
            "Slurm job %s was requeued (restart %d): not this attempt's run", slurm_job, restarts
        )
        return 0
    step = json.loads((Path(args[0]) / "step.json").read_text())
    order = step_order(
        step,
        int(os.environ.get("SLURM_NODEID", "0")),
        os.environ.get("TRAINBOARD_SLURM_MASTER", ""),
    )
    os.environ.update(step["env"])
    os.environ["TRAINBOARD_NODE_NAME"] = order["node"]
    os.environ["TRAINBOARD_NODE_TOKEN"] = Path(step["tokens"][order["node"]]).read_text().strip()
    settings = WorkerSettings()
    try:
        isolation = settings.prepare_isolation()
    except IsolationError as err:
        log.error("%s", err)
        return 2
    registry = DeviceRegistry()
    nvml = NvmlProbe.create()  # GPUs: the ones Slurm's allocation shows this step
    use_gpus = nvml is not None
    probe: DeviceProbe = nvml if nvml is not None else HostProbe(settings.slots, registry)
    # this slice's devices sampled as the node agent samples its own, under the slot's name
    publisher = StreamPublisher(
        settings.redis_url,
        Keys(order["deployment"]).stream(DEVICES_STREAM),
        producer_name(order["node"], "devices"),
    )
    sampler = DeviceSampler(
        probe, registry, publisher, node=order["node"], interval=settings.sample_interval
    )
    api = NodeApiClient(settings.api_url, settings.node_token)
    active = ActiveAttempts()

    #: why the ranks were stopped, once a signal's cause was read from the controller: a
    #: later signal (slurmd's SIGTERM and srun's forwarded one both come, the second while
    #: the first one's handler may still be reading) never overwrites it
    known: list[str] = []

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("signal %d: stopping the ranks of attempt %d", signum, order["attempt_id"])
        if known:
            log.info("already stopping: %s", known[0])
            return
        record = job_record(slurm_job) if signum == signal.SIGTERM else ""
        if known:  # a signal that came during the read (its handler ran inside this one,
            # seen: srun's forwarded SIGTERM 0.1 s after slurmd's, which also killed this
            # read's scontrol) read the cause first: not overwritten with less
            return
        since = preempted(slurm_job, record=record)
        if since is not None:  # the platform's doing: checkpoint, no restart spent
            why = f"preempted by Slurm at {since} (job {slurm_job}: a higher-priority partition)"
            log.info("%s", why)
            known.append(why)
            active.shutdown_all(platform_stop=True, reason=why)
            return
        # Slurm's SIGTERM may be the job's own doing (its time limit: said so), or an
        # operator's scancel: counted against the job as before
        limit = timed_out(slurm_job, record)
        if limit is not None:
            log.info("%s", limit)
            known.append(limit)
        active.shutdown_all(platform_stop=False, reason=limit)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sampler.start()
    try:
        result = run_attempt(
            order,
            settings=settings,
            supervisor_settings=settings.for_supervisor(isolation),
            api=api,
            registry=registry,
            active=active,
            use_gpus=use_gpus,
        )
    finally:
        sampler.stop()
        publisher.close()
        api.close()
        if nvml is not None:
            nvml.shutdown()
    log.info("attempt %d on %s: %s", order["attempt_id"], order["node"], result)
    return 0 if result in REPORTED else 1


if __name__ == "__main__":
    sys.exit(main())
