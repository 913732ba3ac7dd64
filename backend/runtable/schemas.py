"""Shapes of the run table as the API returns it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from backend.health.schemas import EfficiencyOut
from backend.jobs.schemas import JobOut
from backend.telemetry.series.schemas import AlignedCurves, MetricSummary


class RunMetric(BaseModel):
    """A job's metric summarised over every step (compare's summary, from metric_summaries)."""

    final: float | None
    final_step: int | None
    best: float | None = Field(description="by the metric's direction; null without one")
    best_step: int | None


class RunRow(BaseModel):
    job: JobOut
    settings: dict[str, Any] = Field(description="spec path → the job's value (null: absent)")
    metrics: dict[str, RunMetric] = Field(description="metric → summary (absent: none yet)")


class Spread(BaseModel):
    """A value across a group's jobs: mean ± std (sample; 0 for one job), min, max, count."""

    mean: float
    std: float
    min: float
    max: float
    n: int


class RunGroup(BaseModel):
    value: Any = Field(description="the grouping setting's value (null: absent)")
    count: int
    metrics: dict[str, dict[str, Spread]] = Field(
        description="metric → final / best → its spread over the group's jobs that have it"
    )


class RunTable(BaseModel):
    """A page of the run table; everything is computed by the server from stored summaries."""

    total: int = Field(description="rows matching the filters")
    offset: int
    rows: list[RunRow]
    groups: list[RunGroup] | None = Field(description="with group=: every group of the match")
    directions: dict[str, Literal["min", "max"] | None] = Field(
        description="metric → its best end (declared, else by name)"
    )
    metric_names: list[str] = Field(description="metrics the newest visible jobs reported")
    setting_paths: list[str] = Field(description="spec paths of the newest visible jobs")


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
