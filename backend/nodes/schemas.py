"""Shapes of nodes and devices as the API returns them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from backend.nodes.models import NodeState


class DeviceStragglers(BaseModel):
    """A device's straggler events of the recent window (docs/health.md)."""

    count: int = Field(description="straggler events naming this device in the window")
    hours: int = Field(description="the window, in hours up to now")
    jobs: list[int] = Field(description="the jobs they were flagged in, oldest first")


class DeviceOut(BaseModel):
    index: int
    kind: str
    name: str
    uuid: str | None
    memory_total: int | None
    memory_shared: bool = Field(
        False,
        description="memory_total is the node's RAM, shared by its CPU slots, not this device's "
        "own (a CPU slot)",
    )
    job_id: int | None = None
    rank: int | None = None
    stragglers: DeviceStragglers | None = Field(
        None, description="absent when no rank on it was a straggler in the window"
    )


class HostOut(BaseModel):
    """The machine's load at its last heartbeat."""

    cpu_percent: float
    cpus: int | None
    memory_used: int | None
    memory_total: int | None


class DiskOut(BaseModel):
    """The node's data dir at its last heartbeat: low means no new work goes there."""

    free: int = Field(description="bytes")
    total: int = Field(description="bytes")
    low: bool = Field(description="below the disk-low threshold: the node gets no new work")
    reason: str | None = Field(None, description='e.g. "disk low (312 MiB free)"')


class NodeOut(BaseModel):
    name: str
    hostname: str
    address: str
    interface: str | None = Field(None, description="the interface ranks talk over")
    storage: str | None = Field(
        None, description="run-root group: multi-node jobs go only to nodes with the same value"
    )
    state: NodeState
    state_reason: str | None = Field(None, description="why the node is lost or misconfigured")
    incarnation: int = Field(0, description="worker starts registered under this name so far")
    drained: bool
    last_heartbeat: datetime
    host: HostOut | None = None
    disk: DiskOut | None = Field(None, description="absent until the agent reports it")
    devices: list[DeviceOut]


class ManagerNodeOut(BaseModel):
    """One node as the cluster manager (Slurm) describes it: not one of Trainboard's nodes."""

    name: str
    state: str = Field(description="the manager's own state, e.g. Slurm's IDLE, MIXED+DRAIN")
    health: Literal["up", "drained", "lost"] = Field(
        description="up: takes work; drained: takes none (drain, reserved, powered off); "
        "lost: down or not responding (what ran there is gone)"
    )
    reason: str | None = Field(None, description="why it is drained or down, as the manager says")
    cpus: int
    cpus_allocated: int
    gpus: int
    partitions: list[str]
    jobs: list[int] = Field(description="Trainboard jobs with a rank running there now")


class ManagerOut(BaseModel):
    """The cluster manager's nodes as the executor last read them (Slurm: scontrol show node)."""

    manager: str = Field(description='the executor that runs attempts, e.g. "slurm"')
    observed_at: datetime
    unreachable: str | None = Field(None, description="set while the manager does not answer")
    nodes: list[ManagerNodeOut]


class ExecutorOut(BaseModel):
    """Whether the executor's cluster manager answers: what the board and a job's page warn of."""

    executor: str = Field(description='"nodes" (Trainboard\'s own pool) or "slurm"')
    warning: str | None = Field(
        None,
        description="set while the manager does not answer or its view is not being read; "
        "running jobs go on, nothing new starts, states are as last seen (null under the node "
        "pool)",
    )
    observed_at: datetime | None = Field(None, description="when the manager was last read")


class NodeList(BaseModel):
    nodes: list[NodeOut]
    manager: ManagerOut | None = Field(
        None,
        description="under an executor whose cluster manager owns the nodes (Slurm): its "
        "nodes and their state; null under the node pool",
    )


class RegisteredOut(NodeOut):
    """A node as registered, with the id of the deployment it joined."""

    deployment: str = Field(description="its Redis must hold this deployment's marker")
