"""The job contract: one pydantic model shared by browser, API, scheduler and worker.

Its parts first (entrypoint, parallelism, checkpoints, schedule, NaN policy, each
validated on its own), then `Health` and `JobSpec`, which holds the rules across parts."""

from __future__ import annotations

import re
import unicodedata
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from workers.contract.catalog import PIPELINE_UNITS, resolve_hyperparameters
from workers.contract.user_env import MAX_ENV_VARS, check_env, non_finite_path

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


class Update(StrEnum):
    """When data-parallel replicas update: together, on arrival at a server, or apart."""

    sync = "sync"
    async_ = "async"
    local_sgd = "local_sgd"


class Reduce(StrEnum):
    """How a synchronous step's gradients meet: ring all-reduce (DDP) or a parameter server."""

    allreduce = "allreduce"
    parameter_server = "parameter_server"


class Server(StrEnum):
    """Where a parameter server's weights live: rank 0 (which also trains) or a serving rank."""

    rank0 = "rank0"
    dedicated = "dedicated"


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


#: the update modes with a parameter server (`parallelism.server` applies to them)
SERVER_MODES = ("sync/parameter_server", "async")


class Parallelism(Strict):
    """How the job spreads over its gang of devices."""

    strategy: Strategy = Strategy.data
    devices: StrictInt = Field(1, ge=1, le=MAX_DEVICES, description="total gang size")
    nodes: StrictInt = Field(1, ge=1, le=256, description="nodes the gang spans")
    pipeline_stages: StrictInt | None = Field(None, ge=1, le=256)
    microbatches: StrictInt = Field(1, ge=1, le=4096)
    schedule: Literal["gpipe", "1f1b"] = "1f1b"
    bucket_cap_mb: Number = Field(25.0, gt=0, le=1024, description="DDP gradient bucket size")
    update: Update = Field(
        Update.sync,
        description="when replicas update: sync (every step waits for every gradient), async "
        "(rank 0 holds the weights and applies each rank's gradient when it arrives; "
        "staleness recorded) or local_sgd (replicas step alone, parameters averaged every "
        "sync_every steps)",
    )
    reduce: Reduce | None = Field(
        None,
        description="sync only: allreduce (ring all-reduce, DDP; default) or parameter_server "
        "(rank 0 gathers gradients point to point, steps, sends weights back)",
    )
    server: Server | None = Field(
        None,
        description="parameter_server and async only: rank0 (default; rank 0 holds the weights "
        "and trains on a shard too) or dedicated (rank 0 only holds the weights and applies "
        "gradients: one device trains no batch, and the server never delays its own replies)",
    )
    sync_every: StrictInt | None = Field(
        None, ge=1, le=1_000_000, description="local_sgd only: steps between parameter averages"
    )
    max_staleness: StrictInt | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="async only: most updates the server may apply between handing a rank its "
        "weights and applying that rank's gradient; at the bound the server waits for that "
        "rank (a fast rank then waits too). None: no bound, a slow rank never holds others back",
    )
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
        self._update_mode_is_consistent()
        return self

    def _update_mode_is_consistent(self) -> None:
        if self.reduce is not None and self.update is not Update.sync:
            raise ValueError(f"reduce applies to update sync only (update is {self.update})")
        if self.sync_every is not None and self.update is not Update.local_sgd:
            raise ValueError(
                f"sync_every applies to update local_sgd only (update is {self.update})"
            )
        if self.max_staleness is not None and self.update is not Update.async_:
            raise ValueError(
                f"max_staleness applies to update async only (update is {self.update})"
            )
        if self.server is not None and self.mode not in SERVER_MODES:
            raise ValueError(
                f"server applies to reduce parameter_server and update async only (update mode "
                f"is {self.mode})"
            )
        if self.server is Server.dedicated and self.devices < 2:
            raise ValueError("server dedicated needs at least 2 devices (the server, a worker)")
        if self.update is Update.local_sgd and self.sync_every is None:
            raise ValueError("update local_sgd needs sync_every (steps between averages, >= 1)")
        if self.stages > 1 and self.mode != "sync/allreduce":
            raise ValueError(
                f"update mode {self.mode} applies to the data strategy only (pipeline stages "
                "average their gradients with all-reduce: use update sync, reduce allreduce)"
            )

    @property
    def mode(self) -> str:
        """The update mode as one name: sync/allreduce, sync/parameter_server, async, local_sgd."""
        if self.update is Update.sync:
            return f"sync/{self.reduce or Reduce.allreduce}"
        return str(self.update)

    @property
    def stages(self) -> int:
        return self.pipeline_stages or 1

    @property
    def servers(self) -> int:
        """Ranks that only serve (hold the weights, train on no data): 1 with a dedicated server."""
        return 1 if self.server is Server.dedicated else 0

    @property
    def data_parallel_degree(self) -> int:
        return (self.devices - self.servers) // self.stages

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


class Straggler(Strict):
    """One rank made slow on purpose: a teaching and benchmark aid (templates only)."""

    rank: StrictInt = Field(..., ge=0, lt=MAX_DEVICES, description="the rank to slow")
    delay_ms: Number = Field(
        ...,
        gt=0,
        le=60_000,
        description="milliseconds the rank waits in each of its steps before its forward pass, "
        "as a slower device would take longer (its step_time and compute_time show it)",
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
    straggler: Straggler | None = Field(
        None,
        description="slow one rank on purpose, to see what a straggler costs each update mode "
        "(a teaching and benchmark aid; template jobs only)",
    )
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
        if self.straggler is not None:
            if self.template is None:
                raise ValueError("straggler applies to template jobs only (the engine slows it)")
            if self.straggler.rank >= self.parallelism.devices:
                raise ValueError(
                    f"straggler.rank ({self.straggler.rank}) must be below parallelism.devices "
                    f"({self.parallelism.devices})"
                )
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
    if spec.entrypoint is not None and par.mode != "sync/allreduce":
        return (
            f"update mode {par.mode} applies to template jobs only (a user entrypoint "
            "makes its own updates)"
        )
    if spec.precision is Precision.fp16 and par.mode != "sync/allreduce":
        return (
            f"precision 'fp16' is not supported yet with update mode {par.mode} (use bf16 or fp32)"
        )
    return None
