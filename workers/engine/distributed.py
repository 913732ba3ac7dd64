"""torch.distributed setup for one rank: gloo on CPU, NCCL on GPUs, plus a CPU control group."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from workers.rank_env import RankEnv


@dataclass
class ParallelContext:
    """Where this rank runs and how it talks to the others."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")
    control_group: dist.ProcessGroup | None = None

    @property
    def is_leader(self) -> bool:
        return self.rank == 0

    def agree(self, *flags: bool) -> list[bool]:
        """True for each flag that any rank raised (a CPU all-reduce: no GPU sync)."""
        if self.world_size == 1 or not dist.is_initialized():
            return list(flags)
        votes = torch.tensor([int(f) for f in flags], dtype=torch.int32)
        dist.all_reduce(votes, op=dist.ReduceOp.MAX, group=self.control_group)
        return [bool(v) for v in votes.tolist()]


def setup(env: RankEnv, *, timeout_s: float = 300.0) -> ParallelContext:
    """Join the process group; device cuda:LOCAL_RANK when CUDA is available, else CPU."""
    if torch.cuda.is_available():
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(
        backend=backend,
        init_method=f"tcp://{env.master_addr}:{env.master_port}",
        rank=env.rank,
        world_size=env.world_size,
        timeout=timedelta(seconds=timeout_s),
        device_id=device if backend == "nccl" else None,
    )
    # stop/checkpoint votes travel on CPU so agreeing never waits for the GPU stream
    control = dist.new_group(backend="gloo") if backend == "nccl" else dist.group.WORLD
    return ParallelContext(env.rank, env.world_size, device, control)


def teardown() -> None:
    """Leave the process group."""
    if dist.is_initialized():
        dist.destroy_process_group()
