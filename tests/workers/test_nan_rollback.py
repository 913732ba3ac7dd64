"""A NaN gradient with a finite loss, on one rank of two: the rollback skips what may hold it.

Without `grad_clip` the gradient norm is taken every GRAD_NORM_EVERY steps, so a NaN
gradient between two norms shows only in a later step (here the next step's loss); the
rollback then skips every batch since the weights were last seen finite, the bad one among
them, and never trains on it again. With `grad_clip` the norm is taken every step and finds
the very batch. Either way both ranks skip the same batches and end where one process ends
that trains on the batches kept.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from nan_driver import POISONED
from reference import rank_weights, reference_weights, torchrun, two_rank_mlp

from workers.contract.spec import JobSpec
from workers.rank.engine.train import GRAD_NORM_EVERY

pytestmark = pytest.mark.slow  # starts torchrun ranks

STEPS, EVERY = 30, 5


def spec(**fields: object) -> JobSpec:
    """Two data-parallel ranks of the small mlp, checkpoints every 5 steps, one rollback."""
    rollback = {"action": "rollback", "max_rollbacks": 1}
    return two_rank_mlp("nan-rollback", steps=STEPS, every=EVERY, nan_policy=rollback, **fields)


@pytest.mark.parametrize(
    ("clip", "skipped", "said"),
    [
        # the norm every 10 steps: rank 1's weights turn NaN at step 13, unseen; step 14's
        # loss shows it, and nothing is known finite since step 10
        (None, range(10, 14), "at step 14 (the weights were last checked finite after step 10)"),
        # clipping takes the norm every step: it is NaN at step 13 itself
        (0.5, range(12, 13), "the loss or gradients became NaN/Inf at step 13"),
    ],
    ids=["norm-every-10-steps", "clipped-norm-every-step"],
)
def test_a_nan_gradient_on_one_rank_rolls_both_back_past_every_batch_that_may_hold_it(
    clip: float | None, skipped: range, said: str, tmp_path: Path
) -> None:
    assert GRAD_NORM_EVERY == 10 and POISONED in skipped
    job = spec(grad_clip=clip)
    out = torchrun(job, tmp_path, driver="nan_driver.py")

    skip = "that batch" if len(skipped) == 1 else f"the batches of steps 11-{skipped[-1] + 1}"
    assert f"{said}: rolled back to step 10, skipped {skip}, lr x0.5" in out
    assert out.count("rolled back") == 1  # the bad batch never came back
    for step in range(EVERY, STEPS + 1, EVERY):
        replica_0, replica_1 = rank_weights(tmp_path, 0, step), rank_weights(tmp_path, 1, step)
        for key, value in replica_0.items():
            assert torch.equal(value, replica_1[key]), f"rank 1 drifted in {key} at {step}"
    final = rank_weights(tmp_path, 0, STEPS)
    assert all(torch.isfinite(value).all() for value in final.values())
    expected = reference_weights(job, skipped=frozenset(skipped), lr_scale_after=(10, 0.5))
    for key, value in expected.items():
        torch.testing.assert_close(final[key], value, rtol=1e-5, atol=1e-7)
    # the same run without the skip is another run: the test can tell the batches apart
    unskipped = reference_weights(job, lr_scale_after=(10, 0.5))
    assert any(not torch.allclose(final[k], unskipped[k]) for k in unskipped)
