"""Out of memory: how a failure is recognised, and the smaller micro-batch a restart uses.

Shared by the engine (which names its own out-of-memory failures), the supervisor (which
recognises a user script's from its stderr) and the control plane (which restarts with half
the micro-batch under `health.on_oom: reduce_microbatch`). No torch import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: the spec's bound on grad_accum
MAX_ACCUM = 4096
#: every recognised out-of-memory reason starts with this
OOM_PREFIX = "out of memory"
#: what a Python traceback or torch prints when memory runs out (CUDA, host, or the allocator)
_OOM_TEXT = re.compile(
    r"torch\.(cuda\.)?OutOfMemoryError|CUDA out of memory|\bMemoryError\b"
    r"|DefaultCPUAllocator: (can't allocate|not enough) memory|HIP out of memory"
)
#: the engine's test hook (a spec env variable, so only that job sees it): "STEP:MAX" raises
#: MemoryError when step STEP starts with a micro-batch above MAX samples per rank
TEST_OOM_VARIABLE = "TB_TEST_INJECT_HOST_OOM"


def is_oom(reason: str | None) -> bool:
    """Whether an attempt's reason is a recognised out-of-memory failure."""
    return reason is not None and reason.startswith(OOM_PREFIX)


def recognise(reason: str) -> str:
    """The reason, prefixed `out of memory: ` when its text shows memory ran out."""
    if is_oom(reason) or not _OOM_TEXT.search(reason):
        return reason
    return f"{OOM_PREFIX}: {reason}"


@dataclass(frozen=True)
class Shape:
    """Per-rank micro-batch and accumulation steps; their product is kept across reductions."""

    batch_size: int
    grad_accum: int


def shape_after(spec: dict[str, Any], reductions: int) -> Shape | None:
    """The shape after `reductions` halvings of the spec's micro-batch, or None if impossible.

    A pipeline's micro-batch must still split into its `parallelism.microbatches`.
    """
    batch = int(spec.get("hyperparameters", {}).get("batch_size", 0))
    accum = int(spec.get("grad_accum", 1))
    parts = int(spec.get("parallelism", {}).get("microbatches", 1))
    for _ in range(reductions):
        if batch % 2 or (batch // 2) % parts or accum * 2 > MAX_ACCUM:
            return None
        batch, accum = batch // 2, accum * 2
    return Shape(batch, accum)


def reduced_spec(spec: dict[str, Any], reductions: int) -> dict[str, Any]:
    """The spec an attempt runs after `reductions` out-of-memory halvings (same global batch)."""
    shape = shape_after(spec, reductions) if reductions else None
    if shape is None:
        return spec
    hyperparameters = {**spec["hyperparameters"], "batch_size": shape.batch_size}
    return {**spec, "hyperparameters": hyperparameters, "grad_accum": shape.grad_accum}


def parse_test_hook(value: str | None) -> tuple[int, int] | None:
    """(step, max micro-batch) from the test hook's value "STEP:MAX", or None when unset."""
    if not value:
        return None
    step, _, limit = value.partition(":")
    return int(step), int(limit or 0)
