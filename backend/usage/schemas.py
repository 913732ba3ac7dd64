"""What the usage API answers: device-seconds allocated against busy, and users' limits."""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

UsageBy = Literal["user", "job", "node"]


class UsageRow(BaseModel):
    key: str = Field(description="the user name, job id or node name")
    allocated_device_seconds: float
    busy_device_seconds: float = Field(description="allocated, weighted by sampled utilization")
    attempts: int
    slurm_allocated_device_seconds: float | None = Field(
        None,
        description="under the Slurm executor: what Slurm's accounting (sacct AllocTRES x "
        "Elapsed) says the same attempts were allocated; null under the node pool",
    )
    slurm_accounted_attempts: int | None = Field(
        None, description="how many of the attempts Slurm's accounting has recorded so far"
    )


class UsageOut(BaseModel):
    start: datetime = Field(serialization_alias="from")
    end: datetime = Field(serialization_alias="to")
    by: UsageBy
    rows: list[UsageRow]
    total: UsageRow


class DailyUsageRow(BaseModel):
    day: date
    user: str
    allocated_device_seconds: float
    busy_device_seconds: float
    slurm_allocated_device_seconds: float | None = Field(
        None, description="Slurm's accounting of the same attempts (Slurm executor only)"
    )


class DailyUsageOut(BaseModel):
    start: datetime = Field(serialization_alias="from")
    end: datetime = Field(serialization_alias="to")
    rows: list[DailyUsageRow]


class LimitsIn(BaseModel):
    """Any field left out keeps its value; null removes a quota. Strict: `false` is not 0."""

    model_config = ConfigDict(strict=True)

    share: float | None = Field(None, gt=0, le=1e6, description="fair-share weight (default 1)")
    max_devices: int | None = Field(None, ge=0, le=1_000_000, description="devices at once")
    max_device_hours: float | None = Field(
        None, ge=0, le=1e9, description="device-hours per rolling 7 days"
    )


class LimitsOut(BaseModel):
    user: str
    share: float
    max_devices: int | None
    max_device_hours: float | None
    device_hours_7d: float = Field(description="allocated in the last 7 days")
    devices_in_use: int
