"""The engine's cheap per-step gradient norm is bit-identical to torch's own."""

from __future__ import annotations

import torch

from workers.rank.engine.optim import finite_probe, total_norm
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


def test_the_weight_probe_is_finite_exactly_when_every_weight_is() -> None:
    torch.manual_seed(0)
    weights = [p.detach().clone() for p in make_model(16, 64, 4, 4).parameters()]
    assert torch.isfinite(finite_probe(weights))
    for bad in (float("nan"), float("inf"), -float("inf")):
        for i in (0, len(weights) - 1):
            spoiled = [w.clone() for w in weights]
            spoiled[i].view(-1)[-1] = bad
            assert not torch.isfinite(finite_probe(spoiled)), (bad, i)
    mixed = [torch.ones(3), torch.full((2,), float("nan"), dtype=torch.float64)]
    assert not torch.isfinite(finite_probe(mixed)) and finite_probe(mixed).dtype == torch.float32
    assert float(finite_probe([])) == 0.0
    params = list(make_model(4, 8, 2, 2).parameters())
    assert finite_probe(params).grad_fn is None  # no graph kept from the weights
