"""Wire formats between the control plane and the workers: task orders, streams, control keys.

The backend may import this module (like ``workers.contract.spec``); it never imports torch.
"""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator

from workers.contract.spec import JobSpec

#: Celery task that supervises one attempt; routed to the queue of the chosen node
RUN_ATTEMPT_TASK = "trainboard.run_attempt"

#: Redis Streams carrying telemetry from workers to the backend ingest
METRICS_STREAM = "tb:metrics"
DEVICES_STREAM = "tb:devices"
LOGS_STREAM = "tb:logs"
EVENTS_STREAM = "tb:events"
ALL_STREAMS = (METRICS_STREAM, DEVICES_STREAM, LOGS_STREAM, EVENTS_STREAM)
#: each stream entry has one field holding a JSON-encoded Batch
BATCH_FIELD = "b"
#: consumer group of the backend ingest
INGEST_GROUP = "ingest"


def node_queue(node: str) -> str:
    """The Celery queue a node agent consumes."""
    return f"node.{node}"


def control_key(attempt_id: int) -> str:
    """Redis key the backend sets to a StopRequest's value; the supervisor polls it."""
    return f"tb:control:{attempt_id}"


class StopRequest(StrEnum):
    """Why the control plane asks an attempt's ranks to stop (a final checkpoint, then exit).

    Stored as `jobs.stop_request` while the job stops, and set as the attempt's control key.
    """

    cancel = "cancel"
    pause = "pause"
    #: a higher-priority job needs the devices: back to the queue, no restart spent
    preempt = "preempt"


class AttemptOrder(BaseModel):
    """Everything a worker needs to run one attempt (sent as the Celery task's only argument)."""

    attempt_id: int
    job_id: int
    number: int = Field(description="attempt number within the job, from 1")
    node: str
    devices: list[int] = Field(description="device indexes on this node, one per local rank")
    node_rank: int = 0
    nnodes: int = 1
    master_addr: str = "127.0.0.1"
    master_port: int = Field(
        0, description="0: chosen by the node hosting rank 0 when it claims (see its claim)"
    )
    spec: JobSpec
    resume_from: str | None = Field(None, description="checkpoint directory to resume from")
    deployment: str = Field(
        "", max_length=64, description="the deployment's id: its supervisor's Redis names"
    )


#: every integer a producer sends must fit the database's 32-bit INTEGER columns;
#: an item out of bounds is refused alone instead of failing its whole batch
MAX_INT = 2**31 - 1
Id = Annotated[int, Field(ge=1, le=MAX_INT)]
Count = Annotated[int, Field(ge=0, le=MAX_INT)]
Bytes = Annotated[int, Field(ge=0, le=2**63 - 1)]
#: the longest metric name stored; producers truncate, the ingest refuses longer ones
MAX_METRIC_NAME = 128


class MetricPoint(BaseModel):
    attempt_id: Id
    rank: Count
    step: Count
    name: str = Field(min_length=1, max_length=MAX_METRIC_NAME)
    value: float
    time: float = Field(description="unix seconds")


class GpuProcess(BaseModel):
    """One process holding memory on a GPU, attributed to the rank that owns its pid."""

    pid: Count
    mem_used: Bytes | None = Field(None, description="bytes; None where the driver hides it")
    attempt_id: Id | None = None
    rank: Count | None = None


class DeviceSample(BaseModel):
    node: str = Field(max_length=64)
    device: Count
    kind: Literal["gpu", "cpu"]
    time: float
    util: float | None = Field(None, description="percent; a CPU slot reports its process CPU %")
    mem_used: Bytes | None = Field(None, description="bytes; a CPU slot reports its process RSS")
    mem_total: Bytes | None = None
    temperature: float | None = None
    power: float | None = Field(None, description="watts")
    attempt_id: Id | None = None
    rank: Count | None = None
    processes: list[GpuProcess] | None = Field(
        None, max_length=1024, description="GPU only: processes with memory on it (live only)"
    )
    ecc_corrected: Bytes | None = Field(None, description="volatile ECC errors since driver load")
    ecc_uncorrected: Bytes | None = None
    xids: list[Count] | None = Field(
        None, max_length=64, description="Xid errors since the previous sample; None: not watched"
    )


class LogLine(BaseModel):
    attempt_id: Id
    rank: Count
    stream: Literal["stdout", "stderr"] = "stdout"
    seq: Count = Field(description="line number within this rank's stream")
    line: str = Field(max_length=8192)
    time: float


class RunFacts(BaseModel):
    """What an attempt's ranks actually use, from the engine's start event (not the spec).

    After an elastic resume they differ from a spec recomputed on the new device count:
    the engine keeps the checkpoint's global batch (more accumulation on fewer replicas).
    """

    world_size: int = Field(ge=1, le=MAX_INT, description="ranks, one per device")
    data_parallel: int = Field(ge=1, le=MAX_INT, description="replicas of the model")
    pipeline_stages: int = Field(ge=1, le=MAX_INT)
    batch_size: int = Field(ge=1, le=MAX_INT, description="samples per replica per micro-step")
    accumulation: int = Field(ge=1, le=MAX_INT, description="micro-steps per optimizer step")
    global_batch: int = Field(
        ge=1, le=MAX_INT, description="samples per optimizer step, all replicas together"
    )


class AttemptEvent(BaseModel):
    attempt_id: Id
    kind: str = Field(max_length=64, description="e.g. checkpoint, started, warning")
    message: str = Field("", max_length=4096)
    step: Count | None = None
    time: float
    facts: RunFacts | None = Field(
        None, description="a `started` event: what the engine uses (shown on the job page)"
    )


class Batch(BaseModel):
    """One stream entry: a producer's numbered batch of items of one kind."""

    producer: str = Field(max_length=128)
    seq: int = Field(description="per-producer sequence number, from 0, so gaps are detectable")
    items: list[dict[str, object]]
    dropped: int = Field(0, ge=0, description="items a lossy producer dropped before this batch")


class NodeDevice(BaseModel):
    index: int = Field(ge=0, le=65535)
    kind: Literal["gpu", "cpu"]
    name: str = Field(max_length=128)
    uuid: str | None = Field(None, max_length=128)
    memory_total: int | None = Field(None, ge=0, le=2**62, description="bytes")


#: a worker process's own id, new at every start: with the attempt id, the fencing token
Instance = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]


NodeName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]


class NodeRegistration(BaseModel):
    name: NodeName
    instance: Instance = Field(
        default_factory=lambda: uuid.uuid4().hex,
        description="this worker process's id: a new one registers a new incarnation of the "
        "node, which ends every attempt the previous one ran (omitted: a new one)",
    )
    hostname: str = Field(max_length=255)
    address: str = Field(max_length=255, description="address other nodes reach this one on")
    interface: str | None = Field(
        None, max_length=64, description="the network interface holding `address` (ranks use it)"
    )
    api_host: str | None = Field(
        None,
        max_length=255,
        description="the host of the API URL this worker uses: with a loopback `address` "
        "while this is not loopback, the node is misconfigured (its peers cannot reach it)",
    )
    storage_seen: dict[NodeName, Instance] = Field(
        default_factory=dict,
        max_length=4096,
        description="other nodes' markers (name: instance) this node sees in its run root",
    )
    deployments_seen: list[Annotated[str, Field(max_length=64)]] | None = Field(
        None,
        max_length=64,
        description="deployment ids whose markers this worker's Redis holds (None: not checked); "
        "a node whose Redis lacks the API's cannot receive its tasks: it is misconfigured",
    )
    devices: list[NodeDevice] = Field(max_length=1024)
    data_dir: str | None = Field(
        None,
        max_length=4096,
        pattern=r"^/[^\x00]*$",
        description="the node's resolved data dir: reported checkpoints must lie under it",
    )

    @field_validator("devices")
    @classmethod
    def _indexes_are_unique(cls, devices: list[NodeDevice]) -> list[NodeDevice]:
        if len({d.index for d in devices}) != len(devices):
            raise ValueError("device indexes must be unique")
        return devices


class HostStats(BaseModel):
    """The whole machine, sent with each heartbeat (what the node's CPU slots share)."""

    cpu_percent: float = Field(ge=0, le=100, description="all cores, since the previous beat")
    cpus: int = Field(ge=1, le=65535, description="logical CPUs")
    memory_used: Bytes = Field(description="bytes in use (total − available)")
    memory_total: Bytes = Field(description="bytes")


class DiskSpace(BaseModel):
    """The filesystem of the node's data dir (run dirs, logs, checkpoints)."""

    free: Bytes = Field(description="bytes an unprivileged writer may still use")
    total: Bytes = Field(description="bytes")


class Heartbeat(BaseModel):
    instance: Instance = Field(description="the beating worker process's id")
    attempts: list[Id] = Field(
        default_factory=list, max_length=4096, description="attempts whose ranks this node runs"
    )
    deployment_seen: bool | None = Field(
        None, description="whether this worker's Redis holds the API's deployment marker"
    )
    host: HostStats | None = Field(None, description="machine load; absent from older agents")
    disk: DiskSpace | None = Field(None, description="data dir space; absent from older agents")


class HeartbeatReply(BaseModel):
    """What a node must do now: stop attempts it no longer owns, or register again."""

    drained: bool
    stop: list[int] = Field(
        default_factory=list,
        description="attempts this node runs but does not own (ended, or another incarnation's): "
        "kill their ranks before anything else",
    )
    reregister: bool = Field(
        False, description="the node is not registered as this instance: register again"
    )
    lease_seconds: float = Field(
        description="a node that has not heard back for this long must kill every attempt it "
        "runs: the control plane declares it lost then"
    )


class AttemptOutcome(BaseModel):
    """What a worker reports when an attempt's ranks have all exited."""

    outcome: Literal["succeeded", "failed", "stopped"]
    node: str | None = Field(
        None, max_length=64, description="the reporting node (multi-node gangs)"
    )
    instance: Instance | None = Field(
        None, description="the reporting worker process: a report from another one is refused"
    )
    reason: str | None = Field(None, max_length=4096)
    platform_fault: bool = Field(
        False,
        description="the ranks failed for the platform's sake (a rendezvous that could "
        "not complete): the restart does not spend the job's max_restarts",
    )
    pause: bool = Field(
        False,
        description="a stopped attempt whose ranks paused the job by its own policy (a "
        "checkpoint found no space, `checkpoint.on_disk_full: pause`): the job becomes "
        "paused with the reason, resumable, spending no restart",
    )
    exit_codes: list[int] = Field(default_factory=list)
    last_checkpoint: str | None = None
