"""Update modes of the `data` strategy: a parameter server (sync or async) and local SGD.

`sync/allreduce` is DistributedDataParallel (`parallelize.DataParallelRunner`). The other
modes run the same forward and backward without DDP, so each replica's gradients stay its
own, and exchange here, after the backward:

- `sync/parameter_server`: every rank (rank 0 too) computes on its shard; ranks 1..N-1 send
  their flat gradient point to point to rank 0, which averages the N gradients, runs the
  optimizer step (clipping, the one optimizer state) and sends the flat weights back to each.
  Same arithmetic as DDP, so the same weights as the 1-process reference.
- `async`: rank 0 holds the weights and is also a worker. After each of its own steps it
  applies every gradient that has arrived (a worker raises its counter in the rendezvous
  store, then sends), one optimizer step per gradient, and sends that worker the new
  weights; the update's staleness is the number of updates applied since the worker got
  the weights it computed on. No rank runs ahead of rank 0 by more than a step (rank 0
  serves between its own steps). Before every report the gang meets: rank 0 applies every
  outstanding gradient and broadcasts its weights, so the report's collective never waits on
  a rank that is waiting on rank 0, and replicas are identical at reports and checkpoints.
- `local_sgd`: each replica steps on its own gradient; every `sync_every` steps the replicas'
  parameters are averaged (one all-reduce of the flat parameters).

Tensors travel on the rank's device (NCCL-compatible); signals travel through the store.
Bytes sent and received are counted from the tensors each rank hands to send/recv (and,
for collectives, the payload handed to them) and reported per step with the loss.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.distributed as dist
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from workers.contract.spec import Parallelism
from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.metrics import Value
from workers.rank.engine.optim import has_mixed_kinds
from workers.rank.engine.pipeline import Batch

#: point-to-point tags (gloo matches them; NCCL orders messages per pair instead)
GRAD_TAG, WEIGHT_TAG = 11, 12
#: the store counter a rank raises when its gradient is on its way to rank 0 (async)
READY_KEY = "trainboard/async-ready/{rank}"


@dataclass
class Exchange:
    """One step's traffic on this rank, and what the server did in it."""

    sent: int = 0
    received: int = 0
    #: worker gradients rank 0 applied (async), their summed and largest staleness
    applied: int = 0
    staleness_sum: int = 0
    staleness_max: int = 0
    #: worker gradients found waiting when rank 0 looked after its own step (async)
    queued: int = 0

    def row(self, *, server: bool) -> dict[str, Value]:
        """Metrics of the step, read at the report (a meet before it adds its own part)."""
        row: dict[str, Value] = {
            "bytes_sent": lambda: float(self.sent),
            "bytes_received": lambda: float(self.received),
        }
        if server:
            row["updates_applied"] = lambda: float(self.applied)
            row["staleness_mean"] = lambda: self.staleness_sum / max(self.applied, 1)
            row["staleness_max"] = lambda: float(self.staleness_max)
            row["server_queue"] = lambda: float(self.queued)
        return row


class _LocalRunner(Protocol):
    """The DDP-less data-parallel runner whose gradients this module exchanges."""

    model: nn.Module

    def forward_backward(self, batches: list[Batch]) -> torch.Tensor: ...

    def grad_norm(self) -> torch.Tensor: ...


class UpdateRunner:
    """Forward/backward without DDP, then the spec's update mode (not sync/allreduce)."""

    has_loss = True

    def __init__(self, local: _LocalRunner, ctx: ParallelContext, par: Parallelism) -> None:
        self.local, self.ctx, self.mode = local, ctx, par.mode
        self.model: nn.Module = local.model
        self.params = list(self.model.parameters())
        if has_mixed_kinds(self.params):
            raise ValueError(f"update mode {self.mode} needs parameters of one dtype and device")
        self.sync_every = par.sync_every or 1
        self.server = ctx.rank == 0
        self.workers = range(1, ctx.world_size)
        self.nbytes = sum(p.numel() * p.element_size() for p in self.params)
        self.exchange = Exchange()
        #: gradients this rank sent (a worker) or applied per worker (rank 0), this process
        self.updates = 0
        self.served = dict.fromkeys(self.workers, 0)
        #: updates applied to rank 0's weights, and the count each worker's weights stem from
        self.version = 0
        self.based_on = dict.fromkeys(self.workers, 0)
        self._store: dist.Store | None = None

    def forward_backward(self, batches: list[Batch]) -> torch.Tensor:
        """This replica's mean loss; gradients stay local."""
        return self.local.forward_backward(batches)

    def grad_norm(self) -> torch.Tensor:
        """Norm of the gradients held now (after an exchange: the averaged ones)."""
        return self.local.grad_norm()

    def update(
        self, optimizer_step: Callable[[], torch.Tensor], *, step: int
    ) -> tuple[torch.Tensor, dict[str, Value]]:
        """Apply this step's gradients as the mode says; the gradient norm and traffic metrics.

        `optimizer_step` unscales, clips, steps and zeroes the gradients (the Trainer's own);
        `step` is the 1-based step being completed.
        """
        self.exchange = Exchange()
        self.updates += 1
        if self.ctx.world_size == 1:
            norm = optimizer_step()
        elif self.mode == "sync/parameter_server":
            norm = self._sync_server(optimizer_step) if self.server else self._worker()
        elif self.mode == "async":
            norm = self._async_server(optimizer_step) if self.server else self._worker(True)
        else:
            norm = optimizer_step()
            if step % self.sync_every == 0:
                self._average_parameters()
        return norm, self.exchange.row(server=self.server and self.mode == "async")

    # -- the parameter server -------------------------------------------------------------

    def _sync_server(self, optimizer_step: Callable[[], torch.Tensor]) -> torch.Tensor:
        total = self._flat_grads()
        # one inbox, filled worker after worker: rank 0 holds one extra gradient, not N-1
        # (its link is the bottleneck either way); rank order gives the same sum every run
        inbox = torch.empty_like(total)
        for worker in self.workers:
            dist.recv(inbox, src=worker, tag=GRAD_TAG)
            total += inbox
        self.exchange.received += len(self.workers) * _nbytes(total)
        self._set_grads(total.div_(self.ctx.world_size))
        norm = optimizer_step()
        self._send_weights(list(self.workers))
        return norm

    def _async_server(self, optimizer_step: Callable[[], torch.Tensor]) -> torch.Tensor:
        norm = optimizer_step()  # its own gradient, computed on the current weights
        self.version += 1
        waiting = [w for w in self.workers if self._ready(w) > self.served[w]]
        self.exchange.queued += len(waiting)
        for worker in waiting:
            self._apply_from(worker, optimizer_step)
        return norm

    def _apply_from(self, worker: int, optimizer_step: Callable[[], torch.Tensor]) -> None:
        grads = self._empty(self.nbytes // self.params[0].element_size())
        dist.recv(grads, src=worker, tag=GRAD_TAG)
        self.exchange.received += _nbytes(grads)
        self._set_grads(grads)
        optimizer_step()
        staleness = self.version - self.based_on[worker]
        self.version += 1
        ex = self.exchange
        ex.applied, ex.staleness_sum = ex.applied + 1, ex.staleness_sum + staleness
        ex.staleness_max = max(ex.staleness_max, staleness)
        self.served[worker] += 1
        self.based_on[worker] = self.version
        self._send_weights([worker])

    def _worker(self, signal: bool = False) -> torch.Tensor:
        """Send this replica's gradient to rank 0 and take the weights it sends back."""
        grads = self._flat_grads()
        norm = self.local.grad_norm()  # this replica's own; rank 0 reports the applied one
        if signal:
            self._raise_ready()
        dist.send(grads, dst=0, tag=GRAD_TAG)
        self.exchange.sent += _nbytes(grads)
        for p in self.params:
            p.grad = None
        weights = self._empty(grads.numel())
        dist.recv(weights, src=0, tag=WEIGHT_TAG)
        self.exchange.received += _nbytes(weights)
        self._set_weights(weights)
        return norm

    def _send_weights(self, workers: list[int]) -> None:
        weights = _flatten_dense_tensors([p.detach() for p in self.params])
        _wait([dist.isend(weights, dst=w, tag=WEIGHT_TAG) for w in workers])
        self.exchange.sent += len(workers) * _nbytes(weights)

    def _ready(self, worker: int) -> int:
        """How many gradients `worker` has announced (the store's counter; no wait)."""
        return int(self._the_store().add(READY_KEY.format(rank=worker), 0))

    def _raise_ready(self) -> None:
        self._the_store().add(READY_KEY.format(rank=self.ctx.rank), 1)

    def _the_store(self) -> dist.Store:
        if self._store is None:
            self._store = dist.distributed_c10d._get_default_store()
        return self._store

    # -- meeting points: reports and checkpoints ------------------------------------------

    def meet(self, optimizer_step: Callable[[], torch.Tensor]) -> None:
        """Before a report (async): rank 0 applies every outstanding gradient, then broadcasts
        its weights, so no rank waits in the report's collective for rank 0's reply."""
        if self.mode != "async" or self.ctx.world_size == 1:
            return
        if self.server:
            for worker in self.workers:
                while self.served[worker] < self.updates:
                    self._apply_from(worker, optimizer_step)
            self.based_on = dict.fromkeys(self.workers, self.version)
        weights = _flatten_dense_tensors([p.detach() for p in self.params])
        dist.broadcast(weights, src=0)
        if self.server:
            self.exchange.sent += _nbytes(weights)
        else:
            self.exchange.received += _nbytes(weights)
            self._set_weights(weights)

    def settle(self, optimizer: torch.optim.Optimizer, *, step: int) -> None:
        """Before a checkpoint: every replica holds the same weights and optimizer state.

        DCP saves one copy of a replicated tensor, so replicas must agree. Parameter server
        modes: rank 0's optimizer state goes to every rank (workers never step). local_sgd:
        parameters (between averages) and optimizer state are averaged, so a checkpoint is
        also a synchronisation point.
        """
        if self.ctx.world_size == 1:
            return
        if self.mode == "local_sgd":
            if step % self.sync_every:
                self._average_parameters()
            state = [t for p in self.params for t in _float_state(optimizer, p)]
            if state:
                flat = _flatten_dense_tensors(state)
                dist.all_reduce(flat)
                flat /= self.ctx.world_size
                torch._foreach_copy_(state, _unflatten_dense_tensors(flat, state))
            return
        self._share_optimizer_state(optimizer)

    def _share_optimizer_state(self, optimizer: torch.optim.Optimizer) -> None:
        """Rank 0's optimizer state, tensor by tensor, into every rank's optimizer."""
        layout: list[list[object]] = []
        if self.server:
            for i, p in enumerate(self.params):
                for name, value in optimizer.state[p].items():
                    assert isinstance(value, torch.Tensor), f"optimizer state {name} is a tensor"
                    layout.append([i, name, list(value.shape), str(value.dtype), value.is_cpu])
        layout = _broadcast_json(layout, self.ctx)
        for index, name, shape, dtype, on_cpu in layout:
            assert isinstance(index, int) and isinstance(shape, list)
            state = optimizer.state[self.params[index]]
            kind = getattr(torch, str(dtype).removeprefix("torch."))
            value = state[str(name)] if self.server else torch.empty(shape, dtype=kind)
            moved = value.to(self.ctx.device)  # NCCL broadcasts device tensors
            dist.broadcast(moved, src=0)
            if not self.server:
                state[str(name)] = moved.cpu() if on_cpu else moved

    # -- local SGD --------------------------------------------------------------------------

    def _average_parameters(self) -> None:
        weights = _flatten_dense_tensors([p.detach() for p in self.params])
        dist.all_reduce(weights)
        weights /= self.ctx.world_size
        self.exchange.sent += _nbytes(weights)
        self.exchange.received += _nbytes(weights)
        self._set_weights(weights)

    # -- flat buffers -----------------------------------------------------------------------

    def _empty(self, numel: int) -> torch.Tensor:
        return torch.empty(numel, dtype=self.params[0].dtype, device=self.params[0].device)

    def _flat_grads(self) -> torch.Tensor:
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        return _flatten_dense_tensors(grads)

    def _set_grads(self, flat: torch.Tensor) -> None:
        for p, grad in zip(self.params, _unflatten_dense_tensors(flat, self.params), strict=True):
            p.grad = grad

    @torch.no_grad()
    def _set_weights(self, flat: torch.Tensor) -> None:
        torch._foreach_copy_(list(self.params), _unflatten_dense_tensors(flat, self.params))


def _wait(works: list[dist.Work | None]) -> None:
    for work in works:
        assert work is not None, "point-to-point work on a group this rank belongs to"
        work.wait()


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _float_state(optimizer: torch.optim.Optimizer, p: nn.Parameter) -> list[torch.Tensor]:
    """The parameter's floating optimizer state (momentum, moments; not a step count)."""
    return [
        v
        for k, v in optimizer.state[p].items()
        if isinstance(v, torch.Tensor) and v.is_floating_point() and k != "step"
    ]


def _broadcast_json(value: list[list[object]], ctx: ParallelContext) -> list[list[object]]:
    """Rank 0's JSON-able value on every rank (bytes on the CPU control group: no pickle)."""
    data = json.dumps(value).encode() if ctx.is_leader else b""
    size = torch.tensor([len(data)], dtype=torch.int64)
    dist.broadcast(size, src=0, group=ctx.control_group)
    buffer = torch.zeros(int(size.item()), dtype=torch.uint8)
    if ctx.is_leader:
        buffer = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    dist.broadcast(buffer, src=0, group=ctx.control_group)
    loaded: list[list[object]] = json.loads(bytes(buffer.tolist()).decode())
    return loaded


# -- the hooks the Trainer calls (no-ops for DDP and pipelines) -----------------------------


def update(
    runner: object, optimizer_step: Callable[[], torch.Tensor], *, step: int
) -> tuple[torch.Tensor, dict[str, Value]]:
    """The optimizer step of `step` under the runner's update mode, and its traffic metrics."""
    if isinstance(runner, UpdateRunner):
        return runner.update(optimizer_step, step=step)
    return optimizer_step(), {}


def meet(runner: object, optimizer_step: Callable[[], torch.Tensor]) -> None:
    """Before a report's collective: async ranks catch up with rank 0."""
    if isinstance(runner, UpdateRunner):
        runner.meet(optimizer_step)


def settle(runner: object, optimizer: torch.optim.Optimizer, *, step: int) -> None:
    """Before a checkpoint: replicas agree on weights and optimizer state."""
    if isinstance(runner, UpdateRunner):
        runner.settle(optimizer, step=step)
