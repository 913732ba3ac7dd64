"""Micro-batches of one data-parallel rank, addressable by position so a resume replays exactly."""

from __future__ import annotations

import torch
from torch.utils.data import DistributedSampler

#: a dataset at most this large lives on the GPU whole (a template's default is under 1 MiB)
DEVICE_DATASET_MAX_BYTES = 1 << 30


def keep_on_device(nbytes: int, device: torch.device) -> bool:
    """Whether a dataset of nbytes is moved to the training device once, before the loop.

    Gathering each batch on the host and copying it from pageable memory blocks the host
    until the GPU has drained its queue, so every step's kernel launches are exposed: on an
    H100 the mlp benchmark ran at 0.725 x a bare script that kept its data on the GPU
    (docs/benchmarks.md, "GPU acceptance").
    """
    return device.type == "cuda" and nbytes <= DEVICE_DATASET_MAX_BYTES


class ShardedBatches:
    """This rank's shard of an in-memory dataset, reshuffled every epoch like DistributedSampler."""

    def __init__(
        self,
        inputs: torch.Tensor,
        targets: torch.Tensor,
        *,
        batch_size: int,
        rank: int,
        replicas: int,
        seed: int,
        device: torch.device | None = None,
    ) -> None:
        if device is not None and keep_on_device(inputs.nbytes + targets.nbytes, device):
            inputs, targets = inputs.to(device), targets.to(device)
        self.inputs, self.targets = inputs, targets
        self.batch_size = batch_size
        #: the definition of each epoch's order; `epoch_order` computes the same as tensors
        self.sampler: DistributedSampler[int] = DistributedSampler(
            range(len(inputs)),  # type: ignore[arg-type]
            num_replicas=replicas,
            rank=rank,
            shuffle=True,
            seed=seed,
            drop_last=True,
        )
        self.per_epoch = len(self.sampler) // batch_size
        if self.per_epoch == 0:
            raise ValueError(
                f"dataset_size {len(inputs)} is too small for batch_size {batch_size} "
                f"on {replicas} data-parallel ranks"
            )
        self._epoch = -1
        self._order = torch.empty(0, dtype=torch.long)

    def epoch_of(self, micro_step: int) -> int:
        """The epoch the given global micro-step index falls in."""
        return micro_step // self.per_epoch

    def epoch_order(self, epoch: int) -> torch.Tensor:
        """This rank's sample indices in an epoch: `list(sampler)` after `set_epoch(epoch)`.

        The same permutation and slicing as DistributedSampler (drop_last), kept as a tensor:
        its `tolist()` and the tensor built back from the list cost more than the epoch's
        gathers on a small model.
        """
        s = self.sampler
        generator = torch.Generator().manual_seed(s.seed + epoch)
        shuffled = torch.randperm(len(self.inputs), generator=generator)
        return shuffled[s.rank : s.total_size : s.num_replicas]

    def batch(self, micro_step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The micro-batch at a global micro-step index (0-based, counted over all epochs)."""
        epoch, position = divmod(micro_step, self.per_epoch)
        if epoch != self._epoch:  # one small copy an epoch when the data is on the GPU
            self._order = self.epoch_order(epoch).to(self.inputs.device)
            self._epoch = epoch
        index = self._order[position * self.batch_size : (position + 1) * self.batch_size]
        # index_select: the same gather as `inputs[index]` without Python's indexing machinery
        return self.inputs.index_select(0, index), self.targets.index_select(0, index)
