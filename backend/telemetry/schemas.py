"""Response models of the series routes (they shape the frontend's generated types)."""

from __future__ import annotations

from typing import Any

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


class ComparedJob(BaseModel):
    id: int
    name: str
    state: str


class MetricSummary(BaseModel):
    final: float | None
    final_step: int | None
    min: float | None
    max: float | None
    best: float | None = Field(description="min for loss-like names, else max")
    best_step: int | None


class AlignedCurves(BaseModel):
    """One shared x column; per job id a value column with null where it has no point."""

    x: list[float]
    values: dict[str, list[float | None]]


class Comparison(BaseModel):
    jobs: list[ComparedJob]
    spec_diff: dict[str, list[Any]] = Field(description="dotted spec key → one value per job")
    summary: dict[str, dict[str, MetricSummary]] = Field(description="metric → job id → summary")
    curves: dict[str, AlignedCurves] = Field(description="metric → aligned curves")
