"""Shapes of jobs, attempts, events and series as the API returns them."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from backend.jobs.attempt_states import AttemptState
from backend.jobs.states import JobAction, JobPhase, JobState
from workers.contract.protocol import Instance, RunFacts
from workers.contract.spec import MAX_DEVICES, JobSpec


class DeviceFit(BaseModel):
    """One device of a node and whether the estimate fits its memory."""

    node: str
    index: int
    kind: str
    name: str
    memory_total: int | None = Field(description="bytes; a CPU slot's is the host's RAM")
    memory_shared: bool = Field(
        description="memory_total is the node's RAM, shared by its CPU slots (not the device's "
        "own): a CPU slot"
    )
    ranks: int = Field(description="the job's ranks that would use this memory (1 on a GPU)")
    need: int = Field(description="bytes those ranks need together")
    fits: bool | None = Field(description="None: the device's memory is unknown")
    note: str = Field(description="the same in words (need, ranks, memory)")


class MemoryEstimateOut(BaseModel):
    """Bytes per device of a template job before launch, and where it fits."""

    parameter_count: int
    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    runtime: int = Field(description="a GPU rank's CUDA context and allocator slack")
    total: int = Field(description="per device, on a GPU (runtime included)")
    note: str = Field(description="which micro-batches the activations are for")
    server: int | None = Field(
        None,
        description="a dedicated server rank's bytes on a GPU (no activations: it trains no "
        "batch); none when every rank trains",
    )
    devices: list[DeviceFit]
    warnings: list[str]


class Implications(BaseModel):
    """What a spec implies: shown before and after submitting."""

    data_parallel_degree: int
    pipeline_stages: int
    global_batch: int | None
    bubble_fraction: float
    warnings: list[str]


class SliceOut(BaseModel):
    node: str
    devices: list[int]


class JobOut(BaseModel):
    id: int
    name: str
    owner: str
    state: JobState
    phase: JobPhase = Field(
        description="its state's group: waiting (queued), active (placed, running, stopping "
        "or restarting), paused, finished"
    )
    actions: list[JobAction] = Field(description="what this job accepts now (from its state)")
    spec: JobSpec
    implications: Implications
    priority: str
    tags: list[str]
    attempt: int
    node: str | None = Field(description="the node of rank 0")
    devices: list[int] = Field(description="devices on the node of rank 0")
    placement: list[SliceOut] = Field(description="every node of the gang and its devices")
    facts: RunFacts | None = Field(
        None,
        description="what the current attempt's engine uses (its start event): global batch, "
        "world size, accumulation, data-parallel degree; None before it started",
    )
    wait_reason: str | None = Field(
        description="why a queued job (or one pending in Slurm) has not started yet"
    )
    queue_position: int | None = Field(
        None, description="a queued job's place in the queue (1: placed next; docs/scheduler.md)"
    )
    loss_rank: int = Field(
        0,
        description="the rank whose loss stands for the job (the board's sparkline): 0, or for "
        "a pipeline (model, hybrid) the first rank of its last stage, where the loss is computed",
    )
    restarts: int
    restart_at: datetime | None = Field(
        None, description="a restarting job is placed again at this time (its back-off)"
    )
    reason: str | None
    step: int
    total_steps: int | None
    parent_id: int | None
    notes: str = Field("", description="markdown, as the owner wrote it")
    archived: bool = Field(False, description="hidden from the board unless asked for")
    sweep_id: int | None = Field(None, description="the sweep this job is a trial of")
    sweep_trial: int | None = Field(None, description="its trial number in that sweep")
    early_stop: str | None = Field(None, description="why the sweep's rule stopped it")
    created_at: datetime
    updated_at: datetime = Field(description="changes on every update: a newer view wins")
    started_at: datetime | None
    finished_at: datetime | None


class JobList(BaseModel):
    jobs: list[JobOut]


class AttemptOut(BaseModel):
    id: int
    number: int
    node: str = Field(description="the node of rank 0")
    devices: list[int] = Field(description="devices on the node of rank 0")
    placement: list[SliceOut] = Field(description="every node of the gang and its devices")
    state: AttemptState
    resume_from: str | None
    last_checkpoint: str | None
    exit_reason: str | None
    facts: RunFacts | None = Field(None, description="what its engine reported it uses")
    slurm_job_id: str | None = Field(None, description="its Slurm job (the Slurm executor only)")
    created_at: datetime
    claimed_at: datetime | None
    finished_at: datetime | None


class EventOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    kind: str
    message: str
    step: int | None
    attempt_id: int | None
    time: datetime


class MetricNames(BaseModel):
    names: list[str]


class LogOut(BaseModel):
    attempt_id: int
    rank: int
    stream: str
    seq: int
    line: str
    time: float


class LogList(BaseModel):
    lines: list[LogOut]
    dropped: int = Field(
        0, description="the job's oldest lines deleted over the per-attempt cap (all attempts)"
    )
    cap: int = Field(description="log lines kept per attempt (TRAINBOARD_LOG_LINES_PER_ATTEMPT)")


class ResumeIn(BaseModel):
    devices: StrictInt | None = Field(
        None, ge=1, le=MAX_DEVICES, description="a new gang size (elastic)"
    )


class ClaimIn(BaseModel):
    node: str = Field(max_length=64)
    instance: Instance | None = Field(
        None, description="the claiming worker process: only the node's current incarnation wins"
    )
    master_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="the node hosting rank 0: the rendezvous port it chose, free there now "
        "(refused from any other node)",
    )


class ClaimOut(BaseModel):
    claimed: bool
    master_port: int | None = Field(
        None,
        description="the attempt's rendezvous port; None until the node hosting rank 0 has "
        "claimed (then ask GET /api/attempts/{id}/rendezvous)",
    )


class RendezvousOut(BaseModel):
    master_port: int | None = Field(
        description="the port rank 0 listens on; None until its node has claimed"
    )
    live: bool = Field(description="False once the attempt has ended: start no ranks for it")


class FinishOut(BaseModel):
    state: str


class Problem(BaseModel):
    """One refusal, shaped like an item of a 422's detail."""

    loc: list[str | int] = Field(description="the body field it is about, from 'body'")
    msg: str
    type: str


class ValidationOut(BaseModel):
    """What a spec implies and whether a submission of it would be accepted, nothing stored."""

    valid: bool = Field(description="no problems: a submission of it would be accepted")
    implications: Implications | None = Field(
        description="for a refused spec, from the parts they depend on (none if those are refused)"
    )
    memory: MemoryEstimateOut | None = Field(
        description="memory per device and where it fits; none for a script job"
    )
    problems: list[Problem] = Field(
        description="every refusal a submission would get: the schema's (its 422 details), "
        "else this deployment's (entrypoint, not supported yet, no node could ever hold it)"
    )
