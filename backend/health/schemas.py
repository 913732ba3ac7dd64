"""Response models of the health routes: the memory estimate, efficiency, stacks at a hang."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class EfficiencyOut(BaseModel):
    """How much a job cost and how well it used its devices."""

    device_hours: float = Field(description="devices x time claimed, over all attempts")
    busy_device_hours: float | None = Field(description="weighted by sampled utilization")
    run_seconds: float = Field(description="wall seconds its attempts ran")
    devices: int
    samples_per_s_per_device: float | None
    tokens_per_s_per_device: float | None
    flops_per_sample: float | None = Field(description="template jobs: training FLOPs a sample")
    mfu: float | None = Field(description="model FLOPs utilization 0..1; None: see mfu_note")
    mfu_note: str
    device_names: list[str]


class HangStackOut(BaseModel):
    """One rank's Python stacks when its attempt was flagged hung (faulthandler's dump)."""

    attempt_id: int | None
    attempt: int | None = Field(description="the attempt's number within the job (1, 2, ...)")
    rank: int
    step: int | None = Field(description="the step the hung ranks were at")
    time: datetime
    stack: str = Field(description="every thread's stack, the current one first; first 4 KiB")
