"""The job contract: one pydantic model shared by browser, API, scheduler and worker."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    StrictBool,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from workers.contract.catalog import PIPELINE_UNITS, resolve_hyperparameters
from workers.contract.spec_parts import (
    Checkpointing,
    Entrypoint,
    LRSchedule,
    NanPolicy,
    Number,
    Parallelism,
    Precision,
    Priority,
    Strategy,
    Strict,
    clean_text,
)
from workers.contract.user_env import MAX_ENV_VARS, check_env, non_finite_path

TAG_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}$")


def check_tags(value: list[str]) -> list[str]:
    """Tags are unique, 1-64 characters of letters, digits and _.:/- (at submit and after)."""
    for tag in value:
        if not TAG_PATTERN.match(tag):
            raise ValueError(
                f"tag {tag[:70]!r} must be 1-64 characters of letters, digits and _.:/-"
            )
    if len(set(value)) != len(value):
        raise ValueError("tags must be unique")
    return value


class Health(Strict):
    """How the run's health is watched: hangs (by the supervisor) and stragglers (by the API)."""

    hang_timeout_s: Number | None = Field(
        None,
        ge=5,
        le=7 * 24 * 3600,
        description="seconds without a new step before the job is flagged hung; default "
        "max(10 x p99 step time, 60 s), armed per rank after its first step",
    )
    on_hang: Literal["notify", "restart"] = Field(
        "notify", description="restart: stop the attempt and restart from its newest checkpoint"
    )
    straggler_factor: Number = Field(
        1.5, gt=1, le=100, description="a rank whose median step time exceeds the others' by this"
    )
    on_oom: Literal["fail", "reduce_microbatch"] = Field(
        "fail",
        description="reduce_microbatch (templates only): after an out-of-memory failure, "
        "restart from the newest checkpoint with half the micro-batch and twice the "
        "accumulation (same global batch)",
    )
    max_oom_reductions: StrictInt = Field(
        2, ge=1, le=10, description="most micro-batch halvings under on_oom reduce_microbatch"
    )


class JobSpec(Strict):
    """What to run, on how many devices, and how: validated once, at submission."""

    name: str = Field(..., min_length=1, max_length=128)
    template: Literal["mlp", "cnn", "gpt"] | None = None
    entrypoint: Entrypoint | None = None
    parallelism: Parallelism = Field(default_factory=Parallelism)
    hyperparameters: dict[Annotated[str, Field(max_length=64)], Any] = Field(
        default_factory=dict, max_length=64, validate_default=True
    )
    #: every rank's extra variables (NCCL_*, the user's own); docs/jobspec.md lists the refused
    env: Annotated[dict[str, str], AfterValidator(check_env)] = Field({}, max_length=MAX_ENV_VARS)
    precision: Precision = Precision.fp32
    grad_accum: StrictInt = Field(1, ge=1, le=4096, description="micro-steps per optimizer step")
    grad_clip: Number | None = Field(None, gt=0, le=1e6)
    lr_schedule: LRSchedule = Field(default_factory=LRSchedule)
    checkpoint: Checkpointing = Field(default_factory=Checkpointing)
    priority: Priority = Priority.normal
    preemptible: StrictBool = Field(
        True,
        description="false: never preempted for a higher-priority job (docs/scheduler.md)",
    )
    wait_for_capacity: StrictBool = Field(
        False,
        description="true: queue it even if no registered node could hold its gang (it waits "
        "until one registers); false: such a job is refused with 422",
    )
    max_restarts: StrictInt = Field(2, ge=0, le=100)
    nan_policy: NanPolicy = Field(default_factory=NanPolicy)
    health: Health = Field(default_factory=Health)
    tags: list[str] = Field(default_factory=list, max_length=32)

    @field_validator("name")
    @classmethod
    def _name_is_clean(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("name must not be blank")
        return clean_text(value, "name")

    @field_validator("tags")
    @classmethod
    def _tags_are_plain(cls, value: list[str]) -> list[str]:
        return check_tags(value)

    @field_validator("hyperparameters")
    @classmethod
    def _hyperparameters_fit_template(
        cls, value: dict[str, Any], info: ValidationInfo
    ) -> dict[str, Any]:
        template = info.data.get("template")
        if template is None:
            where = non_finite_path(value)
            if where is not None:
                raise ValueError(f"hyperparameters.{where} must be a finite number")
            return value
        try:
            return resolve_hyperparameters(template, value)
        except ValueError as err:
            raise ValueError(f"hyperparameters.{err}") from None

    @model_validator(mode="after")
    def _target_and_combinations(self) -> JobSpec:
        if (self.template is None) == (self.entrypoint is None):
            raise ValueError("give exactly one of template or entrypoint")
        if self.template is None and self.health.on_oom == "reduce_microbatch":
            raise ValueError("health.on_oom reduce_microbatch applies to template jobs only")
        if self.template is not None:
            units = self.hyperparameters[PIPELINE_UNITS[self.template]]
            if self.parallelism.stages > units:
                raise ValueError(
                    f"pipeline_stages ({self.parallelism.stages}) exceeds the template's "
                    f"{PIPELINE_UNITS[self.template]} ({units}); each stage needs a layer"
                )
            if (
                self.template == "gpt"
                and self.hyperparameters["n_embd"] % self.hyperparameters["n_head"]
            ):
                raise ValueError("hyperparameters.n_embd must be divisible by n_head")
            batch = self.hyperparameters["batch_size"]
            if batch % self.parallelism.microbatches:
                raise ValueError(
                    f"batch_size ({batch}) must split evenly into microbatches "
                    f"({self.parallelism.microbatches})"
                )
        return self

    @property
    def total_steps(self) -> int | None:
        steps = self.hyperparameters.get("steps")
        return int(steps) if isinstance(steps, int | float) else None

    @property
    def global_batch(self) -> int | None:
        """Samples per optimizer step: batch_size x grad_accum x data-parallel degree."""
        batch = self.hyperparameters.get("batch_size")
        if not isinstance(batch, int):
            return None
        return batch * self.grad_accum * self.parallelism.data_parallel_degree

    def implications(self) -> dict[str, Any]:
        """What the spec implies, shown to the user before and after submitting."""
        par = self.parallelism
        warnings = []
        if par.strategy is not Strategy.data and par.microbatches < 4 * par.stages:
            warnings.append(
                f"microbatches ({par.microbatches}) < 4 x pipeline_stages ({par.stages}): "
                f"the pipeline idles {par.bubble_fraction:.0%} of each step"
            )
        return {
            "data_parallel_degree": par.data_parallel_degree,
            "pipeline_stages": par.stages,
            "global_batch": self.global_batch,
            "bubble_fraction": par.bubble_fraction,
            "warnings": warnings,
        }


def unsupported_reason(spec: JobSpec) -> str | None:
    """Why the engine cannot run this valid spec yet, or None when it can.

    fp16 is accepted here because the API cannot know where the job will land: on CPU
    slots the attempt fails with a reason saying fp16 needs a GPU.
    """
    par = spec.parallelism
    if spec.precision is Precision.fp16 and par.strategy is not Strategy.data:
        return "precision 'fp16' is not supported yet with pipelines (use bf16 or fp32)"
    return None
