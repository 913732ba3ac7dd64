"""torch.distributed setup for one rank: gloo on CPU, NCCL on GPUs, a CPU control group, a mesh."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.distributed_c10d import _set_pg_timeout

from workers.contract.rank_env import RankEnv
from workers.rank.engine.errors import RendezvousFailed


@dataclass
class ParallelContext:
    """Where this rank runs and how it talks to the others.

    Ranks form a (dp, pp) grid, row-major like `init_device_mesh`: rank = dp_rank * pp + pp_rank.
    A `data` job has pp_size 1; a `model` job has dp_size 1. With a dedicated parameter server
    (`servers` 1, data jobs only) rank 0 trains on no data: ranks 1.. are dp ranks 0...
    """

    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")
    control_group: dist.ProcessGroup | None = None
    pp_size: int = 1
    dp_group: dist.ProcessGroup | None = None
    pp_group: dist.ProcessGroup | None = None
    #: ranks 0..servers-1 only serve: they hold the weights and train on no data
    servers: int = 0

    def __post_init__(self) -> None:
        assert self.world_size % self.pp_size == 0, "pipeline stages must divide the world size"
        assert self.servers == 0 or (self.pp_size == 1 and self.world_size > self.servers), (
            "a dedicated server serves data-parallel workers"
        )

    @property
    def is_leader(self) -> bool:
        return self.rank == 0

    @property
    def serves_only(self) -> bool:
        """This rank holds the weights and trains on no data (a dedicated server)."""
        return self.rank < self.servers

    @property
    def dp_size(self) -> int:
        return (self.world_size - self.servers) // self.pp_size

    @property
    def dp_rank(self) -> int:
        """This rank's data shard (a dedicated server's is 0: it never draws a batch)."""
        return max(self.rank - self.servers, 0) // self.pp_size

    @property
    def pp_rank(self) -> int:
        return self.rank % self.pp_size

    def build_mesh(self) -> None:
        """Create the dp and pp process groups of a 2-D device mesh (collective: every rank)."""
        mesh = init_device_mesh(
            self.device.type, (self.dp_size, self.pp_size), mesh_dim_names=("dp", "pp")
        )
        self.dp_group, self.pp_group = mesh["dp"].get_group(), mesh["pp"].get_group()

    def agree(self, *flags: bool) -> list[bool]:
        """True for each flag that any rank raised (a CPU all-reduce: no GPU sync)."""
        return [v > 0 for v in self.max_all(*map(float, flags))]

    def max_all(self, *values: float) -> list[float]:
        """The maximum of each value over all ranks, on the CPU control group."""
        if self.world_size == 1 or not dist.is_initialized():
            return list(values)
        votes = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(votes, op=dist.ReduceOp.MAX, group=self.control_group)
        return [float(v) for v in votes.tolist()]


def setup(
    env: RankEnv,
    *,
    pp_size: int = 1,
    servers: int = 0,
    timeout_s: float = 300.0,
    rendezvous_timeout_s: float = 60.0,
) -> ParallelContext:
    """Join the process group; device cuda:LOCAL_RANK when CUDA is available, else CPU.

    Finding the others (the store at MASTER_ADDR, gloo's full mesh, the control group) is
    bounded by `rendezvous_timeout_s`: RendezvousFailed names the address not reached.
    Collectives afterwards get `timeout_s`.
    """
    if torch.cuda.is_available():
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    try:
        dist.init_process_group(
            backend=backend,
            init_method=f"tcp://{env.master_addr}:{env.master_port}",
            rank=env.rank,
            world_size=env.world_size,
            timeout=timedelta(seconds=rendezvous_timeout_s),
            device_id=device if backend == "nccl" else None,
        )
        # stop/checkpoint votes travel on CPU so agreeing never waits for the GPU stream
        control = dist.new_group(backend="gloo") if backend == "nccl" else dist.group.WORLD
        dist.barrier(group=control)  # every peer reached: the rendezvous is over
    except (RuntimeError, TimeoutError, OSError) as err:  # torch's Dist*Error are RuntimeErrors
        raise RendezvousFailed(rendezvous_reason(env, rendezvous_timeout_s, err)) from err
    _set_pg_timeout(timedelta(seconds=timeout_s))
    # a dedicated async server waits for the next gradient on a store key: as long as a recv
    dist.distributed_c10d._get_default_store().set_timeout(timedelta(seconds=timeout_s))
    ctx = ParallelContext(
        env.rank, env.world_size, device, control, pp_size=pp_size, servers=servers
    )
    if pp_size > 1:
        ctx.build_mesh()
    return ctx


def rendezvous_reason(env: RankEnv, timeout_s: float, err: BaseException) -> str:
    """Why rank `env.rank` could not join, naming the master's and any peer's address."""
    detail = " ".join(str(err).split())
    if "EADDRINUSE" in detail or "address already in use" in detail.lower():
        # taken between its choice at the claim and the store's bind: a platform fault, and
        # the next attempt's claim chooses another port
        return (
            f"rendezvous failed: port {env.master_port} was taken on node rank 0 before rank "
            f"{env.rank}'s store could listen on it; a new attempt takes another port: "
            f"{detail[:1500]}"
        )
    peer = re.search(r"remote=\[?([^\]\s,]+)\]?:(\d+)", detail)
    where = f"; peer {peer.group(1)}:{peer.group(2)} refused or unreachable" if peer else ""
    return (
        f"rendezvous failed: rank {env.rank} (node rank {env.group_rank}) could not reach "
        f"every peer within {timeout_s:g} s (master {env.master_addr}:{env.master_port}, "
        f"node rank 0{where}): {detail[:1500]}"
    )


def teardown() -> None:
    """Leave the process group."""
    if dist.is_initialized():
        dist.destroy_process_group()
