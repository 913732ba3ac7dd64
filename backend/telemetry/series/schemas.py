"""Response models of the series routes (they shape the frontend's generated types)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from backend.health.schemas import EfficiencyOut
from backend.jobs.schemas import JobOut


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
    """Shared x (steps, seconds since each job's first point, or the device-hours each job had
    used by then); per job id, null: no point."""

    x: list[float]
    values: dict[str, list[float | None]]


class Comparison(BaseModel):
    """Everything the Compare page shows; the page computes none of it."""

    jobs: list[JobOut] = Field(description="the compared jobs, in the order asked")
    metrics: list[str] = Field(description="the compared metrics (default: every one reported)")
    spec_diff: dict[str, list[Any]] = Field(
        description="dotted spec key → one value per job (null: absent), where they differ"
    )
    spec_same: dict[str, Any] = Field(description="dotted spec key → the value every job has")
    directions: dict[str, Literal["min", "max"] | None] = Field(
        description="metric → its best end (curves.direction: declared, else by name)"
    )
    summary: dict[str, dict[str, MetricSummary]] = Field(description="metric → job id → summary")
    curves: dict[str, AlignedCurves] = Field(description="metric → aligned curves")
    efficiency: dict[str, EfficiencyOut] = Field(
        description="job id → device-hours, throughput per device, MFU (side by side)"
    )
