"""Jobs, their attempts and their event timeline."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Float, ForeignKey, Index, String, Text, UniqueConstraint, false
from sqlalchemy.orm import Mapped, mapped_column

from backend.db import Base, StrEnumText, utcnow
from workers.contract.protocol import StopRequest
from workers.contract.spec import JobSpec

#: job id -> (stored spec, its JobSpec), shared by sessions: the scheduler reads the spec of
#: every running job each pass (a queued job's only once placed: backend.scheduler.inputs),
#: and validating 10,000 costs ~0.3 s of CPU where comparing them with the stored values
#: costs ~10 ms. Equal dicts validate to equal models, so a
#: stale or reused id (another database, a test) only costs a validation.
_TYPED_SPECS: dict[int, tuple[dict[str, Any], JobSpec]] = {}
#: entries kept at most (about 11 KB each: ~180 MB when full); the cache starts over when full
MAX_TYPED_SPECS = 16_384


def _typed_spec(job_id: int | None, stored: dict[str, Any]) -> tuple[dict[str, Any], JobSpec]:
    """(stored, its JobSpec) from the shared cache when the stored value is unchanged."""
    known = _TYPED_SPECS.get(job_id) if job_id is not None else None
    if known is not None and known[0] == stored:
        return stored, known[1]
    typed = (stored, JobSpec.model_validate(stored))
    if job_id is not None:
        if len(_TYPED_SPECS) >= MAX_TYPED_SPECS:
            _TYPED_SPECS.clear()
        _TYPED_SPECS[job_id] = typed
    return typed


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_queue", "state", "priority_rank", "id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id"))
    state: Mapped[str] = mapped_column(String(16), default="queued")
    spec: Mapped[dict[str, Any]]
    priority_rank: Mapped[int] = mapped_column(default=1, comment="0 high, 1 normal, 2 low")
    devices_requested: Mapped[int]
    attempt: Mapped[int] = mapped_column(default=0, comment="number of the current attempt")
    restarts: Mapped[int] = mapped_column(default=0)
    restart_at: Mapped[datetime | None] = mapped_column(
        comment="a restarting job is queued again at this time (back-off)"
    )
    unclaimed: Mapped[int] = mapped_column(
        default=0, server_default="0", comment="attempts no node claimed in time"
    )
    oom_reductions: Mapped[int] = mapped_column(
        default=0,
        server_default="0",
        comment="micro-batch halvings made by out-of-memory remediation",
    )
    stop_request: Mapped[StopRequest | None] = mapped_column(
        StrEnumText(StopRequest, 16), comment="cancel or pause"
    )
    reason: Mapped[str | None] = mapped_column(Text)
    step: Mapped[int] = mapped_column(default=0, comment="newest step reported")
    wait_reason: Mapped[str | None] = mapped_column(String(256), comment="why it is still queued")
    total_steps: Mapped[int | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        default=utcnow, onupdate=utcnow, comment="any change, progress included; orders job views"
    )
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    preempted_at: Mapped[datetime | None] = mapped_column(
        comment="when a higher-priority job last took its devices"
    )
    preempted_by: Mapped[int | None] = mapped_column(comment="the job that preempted it last")
    queue_position: Mapped[int | None] = mapped_column(
        comment="1 = next to be placed, in the scheduler's last pass (queued jobs only)"
    )
    notes: Mapped[str | None] = mapped_column(Text)
    archived: Mapped[bool] = mapped_column(
        default=False,
        server_default=false(),
        index=True,
        comment="hidden from the board unless asked for",
    )
    sweep_id: Mapped[int | None] = mapped_column(
        ForeignKey("sweeps.id", ondelete="SET NULL"), index=True
    )
    sweep_trial: Mapped[int | None]
    early_stop: Mapped[str | None] = mapped_column(Text, comment="why a sweep's rule stopped it")
    provenance: Mapped[dict[str, Any] | None] = mapped_column(
        comment="recorded by the control plane: script tree hash, git commit, diff"
    )
    reported_env: Mapped[dict[str, Any] | None] = mapped_column(
        comment="python, torch, packages as reported by the job (untrusted)"
    )
    start_checkpoint: Mapped[str | None] = mapped_column(
        Text, comment="a clone from step N starts from this checkpoint"
    )

    @property
    def spec_model(self) -> JobSpec:
        """The stored spec as the contract's JobSpec (read-only), validated once per spec value.

        Every backend read of the spec goes through here, so each field has the contract's
        default and no other. The model is kept on the instance until `spec` is replaced, and
        by job id across sessions while the stored value is equal (see _TYPED_SPECS).
        """
        stored = self.spec
        cached = self.__dict__.get("_spec_model")
        if cached is None or cached[0] is not stored:
            cached = _typed_spec(self.id, stored)
            self.__dict__["_spec_model"] = cached
        model: JobSpec = cached[1]
        return model


class Attempt(Base):
    __tablename__ = "attempts"
    __table_args__ = (UniqueConstraint("job_id", "number"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    number: Mapped[int]
    node_name: Mapped[str] = mapped_column(String(64))
    devices: Mapped[list[Any]]
    state: Mapped[str] = mapped_column(String(16), default="scheduled")
    master_port: Mapped[int]
    resume_from: Mapped[str | None] = mapped_column(Text)
    last_checkpoint: Mapped[str | None] = mapped_column(Text)
    exit_reason: Mapped[str | None] = mapped_column(Text)
    facts: Mapped[dict[str, Any] | None] = mapped_column(
        comment="what the engine reported it uses at start (global batch, world size)"
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    claimed_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    owner_id: Mapped[int | None] = mapped_column(index=True, comment="the job's owner, for usage")
    device_count: Mapped[int | None] = mapped_column(comment="devices over all its slices")
    slurm_job_id: Mapped[str | None] = mapped_column(
        String(32), comment="the Slurm job that runs it (the Slurm executor only)"
    )
    allocated_device_seconds: Mapped[float | None] = mapped_column(
        Float,
        comment=(
            "devices x seconds from the allocation's start (a Slurm job's StartTime, "
            "allocation_starts; else the claim) to end; set when the attempt has ended"
        ),
    )
    busy_device_seconds: Mapped[float | None] = mapped_column(
        Float, comment="allocated, weighted by each device's sampled utilization"
    )
    log_lines: Mapped[int] = mapped_column(
        default=0, server_default="0", comment="log lines stored (counted at ingest)"
    )
    log_lines_dropped: Mapped[int] = mapped_column(
        default=0, server_default="0", comment="oldest log lines deleted over the per-attempt cap"
    )


class AttemptSlice(Base):
    """The part of an attempt's gang on one node; each node claims its slice exactly once."""

    __tablename__ = "attempt_slices"
    __table_args__ = (UniqueConstraint("attempt_id", "node_name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    attempt_id: Mapped[int] = mapped_column(
        ForeignKey("attempts.id", ondelete="CASCADE"), index=True
    )
    node_name: Mapped[str] = mapped_column(String(64), index=True)
    node_rank: Mapped[int]
    devices: Mapped[list[Any]]
    state: Mapped[str] = mapped_column(String(16), default="scheduled")
    instance: Mapped[str | None] = mapped_column(
        String(64),
        comment="the node instance that claimed it: the fencing token with the attempt id",
    )
    claimed_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]


class JobEvent(Base):
    __tablename__ = "job_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    attempt_id: Mapped[int | None] = mapped_column(ForeignKey("attempts.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(64))
    message: Mapped[str] = mapped_column(Text, default="")
    step: Mapped[int | None]
    time: Mapped[datetime] = mapped_column(default=utcnow)
