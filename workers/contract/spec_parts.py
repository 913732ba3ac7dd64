"""The parts of the job contract (`JobSpec` in spec.py): entrypoint, parallelism, checkpoints,
schedule and NaN policy, each validated on its own."""

from __future__ import annotations

import re
import unicodedata
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    field_validator,
    model_validator,
)

MAX_DEVICES = 1024
MODULE_PATTERN = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
#: a number where a number is meant: no "2", no true (strict), finite (model config)
Number = Annotated[float, Field(strict=True)]


class Strict(BaseModel):
    """Base for spec parts: unknown keys are refused, never ignored."""

    model_config = ConfigDict(extra="forbid", str_max_length=4096, allow_inf_nan=False)


class Strategy(StrEnum):
    data = "data"
    model = "model"
    hybrid = "hybrid"


class Precision(StrEnum):
    fp32 = "fp32"
    bf16 = "bf16"
    fp16 = "fp16"


class Priority(StrEnum):
    """A job's priority, highest first: the one table of names and their queue ranks."""

    high = "high"
    normal = "normal"
    low = "low"

    @property
    def rank(self) -> int:
        """The stored `jobs.priority_rank`: 0 high, 1 normal, 2 low (lower is placed first)."""
        return list(Priority).index(self)

    @classmethod
    def of_rank(cls, rank: int) -> Priority:
        """The priority a stored `jobs.priority_rank` stands for."""
        return list(cls)[rank]


def clean_text(value: str, what: str) -> str:
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn") for ch in value):
        raise ValueError(f"{what} must not contain control or unassigned characters")
    return value


class Entrypoint(Strict):
    """A user's own torchrun-style program: a script path or a module, with arguments."""

    script: str | None = Field(None, min_length=1, max_length=1024)
    module: str | None = Field(None, min_length=1, max_length=256)
    args: list[Annotated[str, Field(max_length=4096)]] = Field(default_factory=list, max_length=256)

    @field_validator("script")
    @classmethod
    def _script_is_relative_and_plain(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if "\x00" in value:
            raise ValueError("script path must not contain NUL bytes")
        if "%" in value:
            raise ValueError("script path must not contain URL-encoded characters")
        if any(part == ".." for part in re.split(r"[\\/]", value)):
            raise ValueError("script path must not contain '..'")
        return clean_text(value, "script path")

    @field_validator("module")
    @classmethod
    def _module_is_dotted_name(cls, value: str | None) -> str | None:
        if value is not None and not MODULE_PATTERN.fullmatch(value):
            raise ValueError("module must be a dotted Python module name, like pkg.train")
        return value

    @field_validator("args")
    @classmethod
    def _args_have_no_nul(cls, value: list[str]) -> list[str]:
        if any("\x00" in arg for arg in value):
            raise ValueError("arguments must not contain NUL bytes")
        return value

    @model_validator(mode="after")
    def _exactly_one_target(self) -> Entrypoint:
        if (self.script is None) == (self.module is None):
            raise ValueError("give exactly one of entrypoint.script or entrypoint.module")
        return self


class Parallelism(Strict):
    """How the job spreads over its gang of devices."""

    strategy: Strategy = Strategy.data
    devices: StrictInt = Field(1, ge=1, le=MAX_DEVICES, description="total gang size")
    nodes: StrictInt = Field(1, ge=1, le=256, description="nodes the gang spans")
    pipeline_stages: StrictInt | None = Field(None, ge=1, le=256)
    microbatches: StrictInt = Field(1, ge=1, le=4096)
    schedule: Literal["gpipe", "1f1b"] = "1f1b"
    bucket_cap_mb: Number = Field(25.0, gt=0, le=1024, description="DDP gradient bucket size")
    rendezvous_timeout_s: Number = Field(
        60.0,
        ge=5,
        le=3600,
        description="seconds the ranks may take to find each other (store and gloo/NCCL "
        "connections) before the attempt fails, naming the address not reached",
    )

    @model_validator(mode="after")
    def _degrees_are_consistent(self) -> Parallelism:
        if self.devices % self.nodes:
            raise ValueError(f"devices ({self.devices}) must divide evenly by nodes ({self.nodes})")
        stages = self.pipeline_stages
        if self.strategy is Strategy.data:
            if stages not in (None, 1):
                raise ValueError("pipeline_stages applies to the model and hybrid strategies only")
            if self.microbatches != 1:
                raise ValueError("microbatches applies to the model and hybrid strategies only")
        elif self.strategy is Strategy.model:
            if stages is None:
                self.pipeline_stages = stages = self.devices
            if stages != self.devices:
                raise ValueError("strategy model needs pipeline_stages equal to devices")
            if stages < 2:
                raise ValueError("strategy model needs at least 2 devices (one per stage)")
        else:
            if stages is None or stages < 2:
                raise ValueError("strategy hybrid needs pipeline_stages >= 2")
            if self.devices % stages or self.devices // stages < 2:
                raise ValueError(
                    "strategy hybrid needs devices to be a multiple (>= 2) of pipeline_stages"
                )
        return self

    @property
    def stages(self) -> int:
        return self.pipeline_stages or 1

    @property
    def data_parallel_degree(self) -> int:
        return self.devices // self.stages

    @property
    def bubble_fraction(self) -> float:
        """Idle share of a GPipe/1F1B schedule: (K-1)/(M+K-1)."""
        k, m = self.stages, self.microbatches
        return (k - 1) / (m + k - 1)


class Checkpointing(Strict):
    every_steps: StrictInt | None = Field(None, ge=1, le=10_000_000)
    every_minutes: Number | None = Field(None, gt=0, le=7 * 24 * 60)
    keep_last: StrictInt = Field(3, ge=1, le=1000)
    on_disk_full: Literal["continue", "pause"] = Field(
        "continue",
        description="a checkpoint that finds no space: train on and retry at the next "
        "interval (continue), or pause the job, resumable from its last checkpoint (pause)",
    )


class LRSchedule(Strict):
    kind: Literal["constant", "cosine"] = "constant"
    warmup_steps: StrictInt = Field(0, ge=0, le=10_000_000)
    min_lr_ratio: Number = Field(0.1, ge=0, le=1)


class NanPolicy(Strict):
    action: Literal["stop", "rollback"] = "stop"
    max_rollbacks: StrictInt = Field(3, ge=0, le=100)
