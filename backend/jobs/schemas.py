"""Shapes of jobs, attempts, events and series as the API returns them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class JobOut(BaseModel):
    id: int
    name: str
    owner: str
    state: str
    spec: dict[str, Any]
    implications: dict[str, Any]
    priority: str
    tags: list[str]
    attempt: int
    node: str | None
    devices: list[int]
    restarts: int
    reason: str | None
    step: int
    total_steps: int | None
    parent_id: int | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class JobList(BaseModel):
    jobs: list[JobOut]


class AttemptOut(BaseModel):
    id: int
    number: int
    node: str
    devices: list[int]
    state: str
    resume_from: str | None
    last_checkpoint: str | None
    exit_reason: str | None
    created_at: datetime
    claimed_at: datetime | None
    finished_at: datetime | None


class EventOut(BaseModel):
    id: int
    kind: str
    message: str
    step: int | None
    attempt_id: int | None
    time: datetime


class MetricNames(BaseModel):
    names: list[str]


class Series(BaseModel):
    """A columnar series: the i-th point is (step[i], time[i], value[i])."""

    step: list[int]
    time: list[float]
    value: list[float]


class LogOut(BaseModel):
    attempt_id: int
    rank: int
    stream: str
    seq: int
    line: str
    time: float


class LogList(BaseModel):
    lines: list[LogOut]


class ClaimIn(BaseModel):
    node: str = Field(max_length=64)


class ClaimOut(BaseModel):
    claimed: bool


class FinishOut(BaseModel):
    state: str
