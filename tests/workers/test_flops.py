"""Template FLOPs per sample (for MFU) against torch's own FLOP counter on the built models."""

from __future__ import annotations

from typing import Any

import pytest
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from workers.contract.flops import flops_per_sample
from workers.contract.spec import JobSpec
from workers.rank.engine.templates import build_task

CASES: list[dict[str, Any]] = [
    {"template": "mlp", "hyperparameters": {"hidden": 128, "layers": 4}},
    {"template": "cnn", "hyperparameters": {"channels": 16, "blocks": 3, "image_size": 16}},
    {"template": "gpt", "hyperparameters": {"n_layer": 2, "n_embd": 64, "block_size": 32}},
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["template"])
def test_flops_per_sample_match_torchs_flop_counter(case: dict[str, Any]) -> None:
    spec = JobSpec.model_validate({"name": "flops", **case})
    hp = spec.hyperparameters
    task = build_task(spec.template or "", hp)
    batch = 4
    counter = FlopCounterMode(display=False)
    # the math attention kernel: its matmuls are counted (CPU flash attention is not)
    with counter, sdpa_kernel(SDPBackend.MATH):
        loss = task.loss_fn(task.model(task.inputs[:batch]), task.targets[:batch])
        loss.backward()
    measured = counter.get_total_flops() / batch
    expected = flops_per_sample(spec.template or "", hp)
    # the counter sees matmuls, convs and attention (forward and backward); 6N also counts
    # the biases and the first layer's input gradient (never computed), and the gpt's head
    # at the vocabulary bound (128 >= the corpus'): a few percent over, never under
    assert expected == pytest.approx(measured, rel=0.05)
    assert expected >= measured
