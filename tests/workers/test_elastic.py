"""Elastic resume: a data job saved on 4 ranks resumes on 2, then on 4, keeping its global batch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from reference import rank_weights, resume, small_mlp, torchrun

from workers.contract.spec import JobSpec
from workers.rank.engine.errors import EngineFailure
from workers.rank.engine.reshape import batch_for

pytestmark = pytest.mark.slow  # starts torchrun ranks

STEPS = 6


def data_spec(devices: int) -> JobSpec:
    """batch 8 per rank: global 32 on 4 ranks; 160 samples = 5 global batches per epoch."""
    return JobSpec.model_validate(
        {
            "name": "elastic",
            "template": "mlp",
            "parallelism": {"devices": devices},
            "hyperparameters": small_mlp(STEPS),
            "lr_schedule": {"kind": "cosine", "warmup_steps": 2},
            "checkpoint": {"every_steps": 2, "keep_last": 10},
        }
    )


def test_four_to_two_to_four_keeps_the_global_batch_and_matches_uninterrupted(
    tmp_path: Path,
) -> None:
    straight = tmp_path / "straight"
    straight.mkdir()
    torchrun(data_spec(4), straight)  # also leaves its step-2 checkpoint
    resume(data_spec(2), tmp_path / "two", straight / "checkpoints" / "step-2")
    resume(data_spec(4), tmp_path / "four", tmp_path / "two" / "checkpoints" / "step-4")

    expected = rank_weights(straight, 0, STEPS)
    for leg, step in (("two", 4), ("four", STEPS)):
        got = rank_weights(tmp_path / leg, 0, step)
        want = rank_weights(straight, 0, step)
        for key in want:  # same samples per step; only the summation order differs
            torch.testing.assert_close(got[key], want[key], rtol=1e-5, atol=1e-6)
    final = rank_weights(tmp_path / "four", 3, STEPS)
    for key in expected:
        torch.testing.assert_close(final[key], expected[key], rtol=1e-5, atol=1e-6)


def test_batch_for_prefers_the_largest_batch_and_refuses_what_cannot_split() -> None:
    assert batch_for(32, dp_size=2, max_batch=8, microbatches=1) == (8, 2)
    assert batch_for(32, dp_size=8, max_batch=8, microbatches=1) == (4, 1)
    assert batch_for(48, dp_size=2, max_batch=16, microbatches=4) == (12, 2)
    with pytest.raises(EngineFailure, match="does not split evenly"):
        batch_for(30, dp_size=4, max_batch=8, microbatches=1)
    with pytest.raises(EngineFailure, match="micro-batches"):
        batch_for(6, dp_size=2, max_batch=8, microbatches=2)
