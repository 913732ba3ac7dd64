"""Elastic resume: keep a checkpoint's global batch on a different data-parallel degree."""

from __future__ import annotations

from workers.rank.engine.errors import EngineFailure


def batch_for(
    global_batch: int, *, dp_size: int, max_batch: int, microbatches: int
) -> tuple[int, int]:
    """(batch_size, grad_accum) with batch_size x grad_accum x dp_size == global_batch.

    Prefers the largest per-rank batch up to the spec's own (fewest accumulation steps)
    that still splits into the pipeline's micro-batches.
    """
    if global_batch % dp_size:
        raise EngineFailure(
            f"the checkpoint's global batch ({global_batch}) does not split evenly over "
            f"{dp_size} data-parallel replicas"
        )
    share = global_batch // dp_size
    for batch in range(min(max_batch, share), 0, -1):
        if share % batch == 0 and batch % microbatches == 0:
            return batch, share // batch
    raise EngineFailure(
        f"the checkpoint's global batch ({global_batch}) cannot be cut into per-replica "
        f"batches of {microbatches} micro-batches on {dp_size} replicas"
    )
