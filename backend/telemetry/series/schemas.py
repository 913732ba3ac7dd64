"""Response models of the series routes (they shape the frontend's generated types)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Curve(BaseModel):
    """Columnar points of one curve."""

    step: list[int]
    time: list[float]
    value: list[float]


class AttemptSeries(Curve):
    attempt_id: int
    job_id: int
    number: int


class MetricSummary(BaseModel):
    final: float | None
    final_step: int | None
    min: float | None
    max: float | None
    best: float | None = Field(
        description="the best end by `direction` (curves.direction); null without one"
    )
    best_step: int | None
    direction: Literal["min", "max"] | None = Field(
        None, description="min: lower is better; max: higher is better; null: neither"
    )


class AlignedCurves(BaseModel):
    """Shared x (steps, seconds since each job's first point, unix seconds, or the device-hours
    each job had used by then); per job id, null: no point."""

    x: list[float]
    values: dict[str, list[float | None]]
    starts: dict[str, float | None] = Field(
        description="job id → unix seconds of its first point drawn (null: none): where its "
        "relative time starts"
    )


class DeviceColumns(BaseModel):
    """One device's samples during one attempt, oldest first (columns of equal length)."""

    node: str
    device: int
    kind: str | None = Field(description="gpu or cpu; null: no sample in the span")
    time: list[float] = Field(description="unix seconds")
    util: list[float | None] = Field(description="percent (a CPU slot's process CPU %)")
    mem_used: list[int | None] = Field(description="bytes (a CPU slot's process RSS)")
    temperature: list[float | None]
    power: list[float | None] = Field(description="watts")


class AttemptDevices(BaseModel):
    """An attempt's span on its devices and what they sampled within it."""

    attempt_id: int
    number: int
    start: float | None = Field(description="unix seconds of its claim; null: it never ran")
    end: float | None = Field(description="unix seconds of its end; null: it holds them now")
    devices: list[DeviceColumns]
