"""A rank's micro-batches follow DistributedSampler's order, epoch after epoch."""

from __future__ import annotations

import pytest
import torch

from workers.rank.engine.data import ShardedBatches


@pytest.mark.parametrize(
    ("size", "replicas", "batch_size"), [(512, 1, 16), (512, 2, 16), (1000, 3, 7), (257, 4, 5)]
)
def test_every_rank_gets_the_samplers_indices_in_the_samplers_order(
    size: int, replicas: int, batch_size: int
) -> None:
    inputs, targets = torch.randn(size, 3), torch.arange(size)
    for rank in range(replicas):
        batches = ShardedBatches(
            inputs, targets, batch_size=batch_size, rank=rank, replicas=replicas, seed=5
        )
        for epoch in range(3):
            batches.sampler.set_epoch(epoch)
            expected = torch.tensor(list(batches.sampler))
            assert torch.equal(batches.epoch_order(epoch), expected)
            first = epoch * batches.per_epoch
            x, y = batches.batch(first + 1)
            assert torch.equal(y, expected[batch_size : 2 * batch_size])
            assert torch.equal(x, inputs[y])
