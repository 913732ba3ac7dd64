"""Per-user scheduling limits set by an admin, and the cluster manager's own accounting."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from backend.db import Base, utcnow


class UserLimits(Base):
    """A user's share and quotas; a user without a row has share 1 and no quota."""

    __tablename__ = "user_limits"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    share: Mapped[float] = mapped_column(Float, default=1.0, comment="fair-share weight")
    max_devices: Mapped[int | None] = mapped_column(comment="devices in use at once")
    max_device_hours: Mapped[float | None] = mapped_column(
        Float, comment="device-hours allocated per rolling 7 days"
    )


class SlurmUsage(Base):
    """What Slurm's accounting (`sacct`) says an attempt's Slurm job was allocated.

    Written once by the Slurm executor when the job has left the queue; the usage view
    shows it beside Trainboard's own figure (`attempts.allocated_device_seconds`).
    """

    __tablename__ = "slurm_usage"

    attempt_id: Mapped[int] = mapped_column(
        ForeignKey("attempts.id", ondelete="CASCADE"), primary_key=True
    )
    slurm_job_id: Mapped[str] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(32), comment="sacct's State of its last run")
    runs: Mapped[int] = mapped_column(comment="allocation lines sacct keeps (requeues + 1)")
    elapsed_seconds: Mapped[float] = mapped_column(Float, comment="ElapsedRaw over its runs")
    allocated_device_seconds: Mapped[float] = mapped_column(
        Float, comment="AllocTRES of the device resource x ElapsedRaw, summed over its runs"
    )
    recorded_at: Mapped[datetime] = mapped_column(default=utcnow)


class AllocationStart(Base):
    """When a cluster manager allocated an attempt's devices, where that comes before the
    claim: under Slurm the job holds its devices from the allocation's start (squeue's
    StartTime), while its batch shell, srun and the supervisor start; Trainboard's allocated
    device-seconds count from here (backend.usage.accounting), as Slurm's do.

    Written by the Slurm executor the first time squeue shows the attempt's job running.
    """

    __tablename__ = "allocation_starts"

    attempt_id: Mapped[int] = mapped_column(
        ForeignKey("attempts.id", ondelete="CASCADE"), primary_key=True
    )
    started_at: Mapped[datetime] = mapped_column(
        comment="the allocation's start as the cluster manager records it"
    )
