"""The engine's start event: what this attempt's ranks actually use, for the job page.

The job page shows these instead of recomputing them from the spec: after an elastic
resume the engine keeps the checkpoint's global batch on the new data-parallel degree
(more accumulation on fewer replicas), which the spec's arithmetic does not know.
"""

from __future__ import annotations

from workers.rank import sdk
from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.train import Trainer


def start_facts(trainer: Trainer, ctx: ParallelContext) -> dict[str, int]:
    """Global batch, world size, degrees and accumulation, as this rank's loop uses them."""
    return {
        "world_size": ctx.world_size,
        "data_parallel": ctx.dp_size,
        "pipeline_stages": ctx.pp_size,
        "batch_size": trainer.batch_size,
        "accumulation": trainer.accum,
        "global_batch": trainer.global_batch,
    }


def report_start(trainer: Trainer, ctx: ParallelContext) -> None:
    """Send the `started` event with its facts (rank 0 alone: one event per attempt)."""
    facts = start_facts(trainer, ctx)
    devices = "1 device" if ctx.world_size == 1 else f"{ctx.world_size} devices"
    stages = f", {ctx.pp_size} pipeline stages" if ctx.pp_size > 1 else ""
    message = (
        f"training on {devices}: global batch {trainer.global_batch} = {trainer.batch_size} x "
        f"{trainer.accum} accumulation x {ctx.dp_size} replicas{stages}"
    )
    sdk.event("started", message, step=trainer.step, facts=facts)
