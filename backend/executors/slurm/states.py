"""What each Slurm job state means for a Trainboard attempt, and Slurm's wait reasons in words.

Slurm owns allocation and node health under this executor; Trainboard owns restarts (jobs
are submitted with --no-requeue, see docs/slurm.md), so every terminal state maps to the
same three attempt outcomes a node-pool worker reports, with whether the restart it leads
to is the platform's fault (spends none of the job's max_restarts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: waiting for an allocation (or put back in the queue by Slurm)
PENDING = frozenset(
    {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"}
)
#: holding its allocation (ranks may run)
ACTIVE = frozenset(
    {"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT", "RESIZING", "SUSPENDED", "STOPPED"}
)
TERMINAL = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "REVOKED",
        "SPECIAL_EXIT",
    }
)


@dataclass(frozen=True)
class SlurmEnd:
    """How an attempt ended, read from Slurm's terminal state."""

    outcome: Literal["succeeded", "failed", "stopped"]
    reason: str
    #: the platform failed the job (a node died, a boot failed): no restart is spent
    platform_fault: bool = False
    #: Slurm took the allocation for a higher tier: the job goes back to the queue
    preempted: bool = False
    out_of_memory: bool = False


def ended(
    state: str,
    *,
    exit_code: int = 0,
    signal: int = 0,
    reason: str | None = None,
    lost_nodes: tuple[str, ...] = (),
    memory_kill: str | None = None,
) -> SlurmEnd:
    """The attempt outcome of a terminal Slurm state (ValueError for a non-terminal one).

    lost_nodes: the job's nodes Slurm now shows down or not responding. A host lost mid-job
    ends it NODE_FAIL when slurmctld notices first, or FAILED when srun notices the lost
    tasks first (both seen on a two-host cluster); either way the platform failed it.

    memory_kill: slurmstepd's words in the job's output when it killed a step over its
    memory limit without cgroups (OverMemoryKill): the job then ends FAILED (or CANCELLED),
    and is out of memory all the same.
    """
    state = state.split(" ")[0].rstrip("+").upper()
    why = f" ({reason})" if reason and reason != "None" else ""
    if memory_kill and state in ("FAILED", "CANCELLED"):
        return SlurmEnd("failed", f"Slurm: {state}: {memory_kill}", out_of_memory=True)
    if lost_nodes and state in ("FAILED", "CANCELLED", "NODE_FAIL"):
        hosts = ", ".join(lost_nodes)
        return SlurmEnd("failed", f"Slurm: {state}: lost node {hosts}{why}", platform_fault=True)
    if state == "COMPLETED":
        if exit_code == 0:
            return SlurmEnd("succeeded", "Slurm: COMPLETED")
        return SlurmEnd("failed", f"Slurm: COMPLETED with exit code {exit_code}{why}")
    if state in ("FAILED", "SPECIAL_EXIT"):
        by = f"signal {signal}" if signal else f"exit code {exit_code}"
        return SlurmEnd("failed", f"Slurm: {state}, {by}{why}")
    if state == "CANCELLED":
        return SlurmEnd("stopped", f"Slurm: CANCELLED{why}")
    if state in ("TIMEOUT", "DEADLINE"):
        return SlurmEnd("failed", f"Slurm: {state}: the job reached its time limit{why}")
    if state == "OUT_OF_MEMORY":
        return SlurmEnd("failed", f"Slurm: OUT_OF_MEMORY{why}", out_of_memory=True)
    if state == "PREEMPTED":
        return SlurmEnd("stopped", f"Slurm: PREEMPTED{why}", preempted=True, platform_fault=True)
    if state in ("NODE_FAIL", "BOOT_FAIL", "REVOKED"):
        return SlurmEnd("failed", f"Slurm: {state}{why}", platform_fault=True)
    raise ValueError(f"{state} is not a terminal Slurm state")


#: squeue's pending reasons a person should read as words (the rest are shown as given)
REASONS = {
    "Priority": "waiting in Slurm's queue behind higher-priority jobs (Priority)",
    "Resources": "waiting for Slurm to free enough nodes/devices (Resources)",
    "Dependency": "waiting for a job it depends on (Dependency)",
    "BeginTime": "waiting for its start time (BeginTime)",
    "PartitionDown": "the Slurm partition is down (PartitionDown)",
    "PartitionNodeLimit": "asks more nodes than the partition allows (PartitionNodeLimit)",
    "ReqNodeNotAvail": "a required node is unavailable (ReqNodeNotAvail)",
    "QOSMaxGRESPerUser": "over the QOS limit on devices per user (QOSMaxGRESPerUser)",
    "AssocGrpGRES": "the account's device limit is reached (AssocGrpGRES)",
    "JobHeldUser": "held by its owner (JobHeldUser)",
    "JobHeldAdmin": "held by an administrator (JobHeldAdmin)",
    "None": "waiting for Slurm's scheduler to look at it",
}


def wait_reason(reason: str | None) -> str:
    """A pending job's Slurm reason as the board's wait reason."""
    if not reason:
        return REASONS["None"]
    key = reason.split(",")[0].strip("()")
    return REASONS.get(key, f"Slurm: {reason}")
