"""A rank's micro-batches follow DistributedSampler's order, epoch after epoch."""

from __future__ import annotations

import pytest
import torch

from workers.rank.engine.data import DEVICE_DATASET_MAX_BYTES, ShardedBatches, keep_on_device


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


def test_a_small_dataset_lives_on_the_gpu_a_large_one_and_any_on_a_cpu_stay_put() -> None:
    """On a GPU each batch is gathered there: a host copy every step stalled an H100."""
    gpu, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert keep_on_device(4096 * 33 * 4, gpu)
    assert keep_on_device(DEVICE_DATASET_MAX_BYTES, gpu)
    assert not keep_on_device(DEVICE_DATASET_MAX_BYTES + 1, gpu)
    assert not keep_on_device(16, cpu)


def test_on_a_cpu_the_batches_gather_from_the_dataset_itself() -> None:
    inputs, targets = torch.randn(64, 3), torch.arange(64)
    batches = ShardedBatches(
        inputs, targets, batch_size=8, rank=0, replicas=1, seed=1, device=torch.device("cpu")
    )
    assert batches.inputs is inputs and batches.targets is targets
    x, y = batches.batch(3)
    assert torch.equal(x, inputs[y])
