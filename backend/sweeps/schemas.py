"""Shapes of a sweep: what is submitted and what the API returns."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    field_validator,
    model_validator,
)

from backend.jobs.states import JobPhase, JobState
from workers.contract.spec import Number

Method = Literal["grid", "random"]
SPEC_PATH = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,4}$"
MAX_TRIALS = 256
#: the most points a grid may have, counted before it is built (`trials` takes the first)
MAX_GRID_POINTS = 4096


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Choice(Strict):
    """Values to try, as given (numbers, strings, booleans)."""

    values: list[Any] = Field(min_length=1, max_length=64)


class Range(Strict):
    """A numeric range: `steps` evenly spaced values in a grid, uniform draws at random."""

    min: Number
    max: Number
    log: StrictBool = Field(False, description="space values evenly in log scale (min > 0)")
    integer: StrictBool = False
    steps: StrictInt | None = Field(None, ge=1, le=64, description="grid points (grid only)")

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.max < self.min:
            raise ValueError("max must not be below min")
        if self.log and self.min <= 0:
            raise ValueError("a log range needs min > 0")
        return self


class EarlyStopping(Strict):
    """Stop poor trials at rungs (steps), judged on the sweep's metric against the others'.

    asha: at each rung a trial goes on only if its value is in the best 1/reduction_factor
    of the values recorded at that rung so far (itself included). median: it goes on only
    if its value is no worse than the median of the other trials' values at that rung.
    Either judges only once `min_trials` trials (itself included) have reached the rung.
    """

    rule: Literal["asha", "median"]
    rungs: list[StrictInt] = Field(min_length=1, max_length=16, description="steps")
    reduction_factor: Number = Field(3, ge=2, le=16, description="asha: keep the best 1/this")
    min_trials: StrictInt = Field(
        2, ge=1, le=64, description="trials that must have reached a rung before it judges"
    )

    @model_validator(mode="after")
    def _rungs_increase(self) -> EarlyStopping:
        if any(r <= 0 for r in self.rungs) or self.rungs != sorted(set(self.rungs)):
            raise ValueError("rungs must be increasing positive steps")
        return self


class SweepIn(Strict):
    name: str = Field(min_length=1, max_length=128)
    base: dict[str, Any] = Field(description="the JobSpec every trial starts from")
    method: Method = "grid"
    parameters: dict[
        str,
        Choice | Range,
    ] = Field(min_length=1, max_length=16, description="spec path → values to try")
    trials: StrictInt | None = Field(
        None,
        ge=1,
        le=MAX_TRIALS,
        description="random: how many; grid: the first this many points (a grid without"
        f" it may have up to {MAX_TRIALS}; any grid up to {MAX_GRID_POINTS})",
    )
    seed: StrictInt = Field(0, ge=0, le=2**31)
    max_concurrency: StrictInt = Field(2, ge=1, le=64, description="trials running at once")
    metric: str = Field("loss", min_length=1, max_length=128, description="what 'best' means")
    mode: Literal["min", "max"] = Field("min", description="min: lower is better")
    early_stopping: EarlyStopping | None = None

    @field_validator("parameters")
    @classmethod
    def _paths(cls, value: dict[str, Choice | Range]) -> dict[str, Choice | Range]:
        for path in value:
            if not re.match(SPEC_PATH, path):
                raise ValueError(f"{path[:80]!r} is not a spec path like hyperparameters.lr")
        return value


class TrialOut(BaseModel):
    number: int
    setting: dict[str, Any]
    job_id: int | None = Field(description="None until it is launched")
    state: JobState | Literal["pending"]
    phase: JobPhase = Field(description="the state's group: a pending trial is waiting")
    step: int
    value: float | None = Field(description="the newest value of the sweep's metric")
    rungs: dict[str, float] = Field(description="rung step → the value it was judged on")
    early_stop: str | None


class SweepOut(BaseModel):
    id: int
    name: str
    owner: str
    state: Literal["running", "finished", "cancelled"]
    method: Method
    max_concurrency: int
    metric: str
    mode: Literal["min", "max"]
    early_stopping: EarlyStopping | None
    parameters: list[str]
    trials: list[TrialOut]
    best: TrialOut | None = Field(
        description="the best trial by its last value of the metric: among the trials that "
        "ran every step, or, while none has, among all so far"
    )
    created_at: datetime
    finished_at: datetime | None


class SweepList(BaseModel):
    sweeps: list[SweepOut]
