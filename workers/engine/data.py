"""Micro-batches of one data-parallel rank, addressable by position so a resume replays exactly."""

from __future__ import annotations

import torch
from torch.utils.data import DistributedSampler


class ShardedBatches:
    """This rank's shard of an in-memory dataset, reshuffled every epoch by DistributedSampler."""

    def __init__(
        self,
        inputs: torch.Tensor,
        targets: torch.Tensor,
        *,
        batch_size: int,
        rank: int,
        replicas: int,
        seed: int,
    ) -> None:
        self.inputs, self.targets = inputs, targets
        self.batch_size = batch_size
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

    def batch(self, micro_step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The micro-batch at a global micro-step index (0-based, counted over all epochs)."""
        epoch, position = divmod(micro_step, self.per_epoch)
        if epoch != self._epoch:
            self.sampler.set_epoch(epoch)  # a fresh shuffle each epoch, same on every rank
            self._order = torch.tensor(list(self.sampler), dtype=torch.long)
            self._epoch = epoch
        index = self._order[position * self.batch_size : (position + 1) * self.batch_size]
        return self.inputs[index], self.targets[index]
