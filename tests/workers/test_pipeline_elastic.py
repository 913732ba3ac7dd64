"""Elastic resume of pipelines: a 2x2 hybrid job resumes as a 2-stage model job (dp 2 → 1)
and back (dp 1 → 2), keeping its global batch and matching an uninterrupted run."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from reference import rank_weights, resume, small_mlp, torchrun

from workers.contract.spec import JobSpec

pytestmark = pytest.mark.slow  # starts torchrun ranks

STEPS, STAGES = 6, 2


def pipeline_spec(devices: int) -> JobSpec:
    """2 stages on `devices` ranks: dp = devices / 2. Batch 8 per replica, 2 accumulation
    steps on 2 replicas: global batch 32; 160 samples = 5 global batches per epoch, so the
    run crosses an epoch boundary and every step's samples are the same on any dp degree."""
    return JobSpec.model_validate(
        {
            "name": "pipeline-elastic",
            "template": "mlp",
            "parallelism": {
                "strategy": "hybrid" if devices > STAGES else "model",
                "devices": devices,
                "pipeline_stages": STAGES,
                "microbatches": 2,
                "schedule": "1f1b",
            },
            "hyperparameters": small_mlp(STEPS),
            "grad_accum": 2 if devices > STAGES else 4,  # global batch 32 either way
            "grad_clip": 0.5,
            "lr_schedule": {"kind": "cosine", "warmup_steps": 2},
            "checkpoint": {"every_steps": 2, "keep_last": 10},
        }
    )


def whole_model(out_dir: Path, step: int, first_rank: int = 0) -> dict[str, torch.Tensor]:
    """Every stage's weights at a checkpointed step, from one pipeline (ranks first_rank...)."""
    merged: dict[str, torch.Tensor] = {}
    for stage in range(STAGES):
        part = rank_weights(out_dir, first_rank + stage, step)
        assert not set(part) & set(merged), "a layer on two stages"
        merged.update(part)
    return merged


def test_hybrid_resumes_as_model_and_back_matching_uninterrupted(tmp_path: Path) -> None:
    straight = tmp_path / "straight"
    straight.mkdir()
    torchrun(pipeline_spec(4), straight)  # hybrid 2x2; also leaves its step-2 checkpoint
    # the spec of the resumed legs says 8 x 2 on 2 replicas; the checkpoint's global batch
    # (32) wins: on one replica that is 8 x 4 accumulation steps, and back on two, 8 x 2
    resume(pipeline_spec(2), tmp_path / "model", straight / "checkpoints" / "step-2")
    resume(pipeline_spec(4), tmp_path / "hybrid", tmp_path / "model" / "checkpoints" / "step-4")

    for leg, step in (("model", 4), ("hybrid", STEPS)):
        got, want = whole_model(tmp_path / leg, step), whole_model(straight, step)
        assert sorted(got) == sorted(want)
        for key in want:  # same samples per step; only the summation order differs
            torch.testing.assert_close(got[key], want[key], rtol=1e-5, atol=1e-6)
    # the resumed hybrid's second replica is bit-identical to its first
    first, second = (
        whole_model(tmp_path / "hybrid", STEPS),
        whole_model(tmp_path / "hybrid", STEPS, first_rank=STAGES),
    )
    for key, value in first.items():
        assert torch.equal(value, second[key]), f"replicas drifted in {key}"
    start = whole_model(straight, 2)
    assert any(not torch.equal(start[k], first[k]) for k in start)  # it did train
