"""Data, pipeline and hybrid runs compute what one process computes, and replicas never drift."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from reference import rank_weights, reference_weights, small_mlp, torchrun

from workers.contract.spec import JobSpec
from workers.rank.engine.templates import build_task

pytestmark = pytest.mark.slow  # starts torchrun ranks

STEPS, EVERY = 6, 3
PARALLELISM = {
    "data-2": {"strategy": "data", "devices": 2},
    "model-2-gpipe": {
        "strategy": "model",
        "devices": 2,
        "pipeline_stages": 2,
        "microbatches": 4,
        "schedule": "gpipe",
    },
    "hybrid-2x2-1f1b": {
        "strategy": "hybrid",
        "devices": 4,
        "pipeline_stages": 2,
        "microbatches": 2,
        "schedule": "1f1b",
    },
}


def spec_for(parallelism: dict[str, object], **fields: object) -> JobSpec:
    """A small mlp run crossing an epoch boundary, with clipping, warmup+cosine and accumulation."""
    return JobSpec.model_validate(
        {
            "name": "equivalence",
            "template": "mlp",
            "parallelism": parallelism,
            "hyperparameters": small_mlp(STEPS),
            "grad_accum": 2,
            "grad_clip": 0.5,
            "lr_schedule": {"kind": "cosine", "warmup_steps": 2},
            "checkpoint": {"every_steps": EVERY},
            **fields,
        }
    )


@pytest.mark.parametrize("name", list(PARALLELISM))
def test_parallel_run_matches_one_process_and_replicas_stay_bit_identical(
    name: str, tmp_path: Path
) -> None:
    spec = spec_for(PARALLELISM[name])
    par = spec.parallelism
    torchrun(spec, tmp_path)
    reference = reference_weights(spec)

    for step in range(EVERY, STEPS + 1, EVERY):
        for rank in range(par.devices):
            replica_0 = rank_weights(tmp_path, rank % par.stages, step)
            mine = rank_weights(tmp_path, rank, step)
            assert list(mine) == list(replica_0)
            for key, value in mine.items():
                assert torch.equal(value, replica_0[key]), f"rank {rank} drifted in {key}"
    stages = [rank_weights(tmp_path, rank, STEPS) for rank in range(par.stages)]
    merged = {key: value for stage in stages for key, value in stage.items()}
    assert sorted(merged) == sorted(reference)  # global names, no "module." prefixes
    assert sum(len(stage) for stage in stages) == len(reference)  # each layer on one stage
    for key, expected in reference.items():
        torch.testing.assert_close(merged[key], expected, rtol=1e-5, atol=1e-7)
    start = build_task("mlp", spec.hyperparameters).model.state_dict()
    assert any(not torch.equal(start[k], merged[k]) for k in start)  # it did train
