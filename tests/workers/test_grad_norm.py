"""The engine's cheap per-step gradient norm is bit-identical to torch's own."""

from __future__ import annotations

import torch

from workers.rank.engine.optim import total_norm
from workers.rank.engine.templates.mlp import make_model


def test_total_norm_is_bit_identical_to_get_total_norm_and_clip_grad_norm() -> None:
    torch.manual_seed(0)
    model = make_model(16, 64, 4, 4)
    model(torch.randn(32, 16)).logsumexp(dim=1).mean().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    ours = total_norm(grads)
    assert ours.dtype == torch.float32 and ours.shape == ()
    assert torch.equal(ours, torch.nn.utils.get_total_norm(grads))
    assert torch.equal(ours, torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf")))


def test_total_norm_of_mixed_dtypes_and_of_nothing() -> None:
    grads = [torch.ones(3), torch.ones(4, dtype=torch.float64)]
    assert torch.equal(total_norm(grads), torch.nn.utils.get_total_norm(grads).float())
    assert float(total_norm([torch.full((2,), float("nan"))])) != 0.0  # NaN is kept, not lost
    assert float(total_norm([])) == 0.0
