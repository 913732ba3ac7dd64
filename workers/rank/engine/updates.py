"""Update modes of the `data` strategy: a parameter server (sync or async) and local SGD.

`sync/allreduce` is DistributedDataParallel (`parallelize.DataParallelRunner`). The other
modes run the same forward and backward without DDP, so each replica's gradients stay its
own, and exchange here, after the backward:

- `sync/parameter_server`: every rank (rank 0 too) computes on its shard; ranks 1..N-1 send
  their flat gradient point to point to rank 0, which averages the N gradients, runs the
  optimizer step (clipping, the one optimizer state) and sends the flat weights back to each.
  Same arithmetic as DDP, so the same weights as the 1-process reference.
- `async`: rank 0 holds the weights and is also a worker. Ranks take as many steps as their
  speed allows: the job's step is rank 0's, a worker steps again as soon as rank 0 has
  answered its gradient. After each of its own steps rank 0 applies every gradient that has
  arrived (a worker raises its counter in the rendezvous store, then sends), one optimizer
  step per gradient, and sends that worker the new weights with a flag: go on, or meet. An
  update's staleness is the number of updates applied since the worker got the weights it
  computed on; `max_staleness` bounds it (rank 0 then waits for the oldest worker's gradient
  before applying anything else). Reports and checkpoints are rank 0's decision: the
  replies of a step that ends in one say "meet" (and every reply carries rank 0's step),
  rank 0 applies each worker's next gradient and broadcasts its weights, and every rank
  takes part in the report at that step, so
  a slow worker costs the others at most one of its steps per report, and replicas are
  identical at reports and checkpoints.
- `local_sgd`: each replica steps on its own gradient; every `sync_every` steps the replicas'
  parameters are averaged (one all-reduce of the flat parameters).

`parallelism.server: dedicated` (sync/parameter_server and async): rank 0 trains on no data, it
only serves. Its workers append their loss to the gradient they send (the server has none of
its own; it reports their mean). Sync: the server sums the N-1 gradients and divides by N-1.
Async: the job's step is the next N-1 gradients to arrive (a global batch's worth), each
applied on its own: a worker takes a ticket in the store's arrival queue (then sends), and
the server blocks on the next ticket's key, so it waits for whichever worker is first
without polling.

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
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from workers.contract.spec import Parallelism
from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.metrics import Value
from workers.rank.engine.optim import has_mixed_kinds
from workers.rank.engine.pipeline import Batch

#: point-to-point tags (gloo matches them; NCCL orders messages per pair instead)
GRAD_TAG, WEIGHT_TAG = 11, 12
#: the store counter a rank raises when its gradient is on its way to rank 0 (async)
READY_KEY = "trainboard/async-ready/{rank}"
#: an async reply's header (int64: rank 0's step, then go on or meet) travels before it
HEADER_TAG = 13
GO_ON, MEET = 0, 1
#: a dedicated async server's arrival queue: the tickets taken, and ticket n's worker rank
QUEUE_TAIL, QUEUE_KEY = "trainboard/async-queue/tail", "trainboard/async-queue/{ticket}"
#: the Trainer's optimizer step (unscale, clip, step, zero the gradients): the gradient norm,
#: or None on the steps that take none (docs/engine.md "The loop and reports")
OptimizerStep = Callable[[], torch.Tensor | None]


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
    #: a dedicated server's loss: the workers' mean (sync) or the applied gradients' (async)
    loss: torch.Tensor | None = None
    loss_sum: torch.Tensor | None = None
    #: the norm of the last gradient rank 0 applied, when it took one
    norm: torch.Tensor | None = None

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
        if self.loss is not None:
            row["loss"] = self.loss
        return row


class _LocalRunner(Protocol):
    """The DDP-less data-parallel runner whose gradients this module exchanges."""

    model: nn.Module

    def forward_backward(self, batches: list[Batch]) -> torch.Tensor: ...

    def grad_norm(self) -> torch.Tensor: ...


class UpdateRunner:
    """Forward/backward without DDP, then the spec's update mode (not sync/allreduce)."""

    def __init__(self, local: _LocalRunner, ctx: ParallelContext, par: Parallelism) -> None:
        self.local, self.ctx, self.mode = local, ctx, par.mode
        self.model: nn.Module = local.model
        self.params = list(self.model.parameters())
        if has_mixed_kinds(self.params):
            raise ValueError(f"update mode {self.mode} needs parameters of one dtype and device")
        assert ctx.servers == par.servers, "the context's servers are the spec's"
        self.sync_every = par.sync_every or 1
        self.server = ctx.rank == 0
        #: rank 0 only serves; workers then send their loss after their gradient
        self.dedicated = ctx.servers > 0
        #: the job's loss is rank 0's: its own, or under a dedicated server the workers' it got
        self.has_loss = not self.dedicated or self.server
        self.workers = range(1, ctx.world_size)
        self.numel = sum(p.numel() for p in self.params)
        self.grad_numel = self.numel + (1 if self.dedicated else 0)
        #: this replica's last loss (a dedicated server's worker sends it with its gradient)
        self.loss: torch.Tensor | None = None
        self.exchange = Exchange()
        #: gradients this rank sent (a worker) or applied per worker (rank 0), this process
        self.updates = 0
        self.served = dict.fromkeys(self.workers, 0)
        #: updates applied to rank 0's weights, and the count each worker's weights stem from
        self.version = 0
        self.based_on = dict.fromkeys(self.workers, 0)
        # a round of every training rank's gradient needs dp_size - 1 (docs/jobspec.md)
        self.max_staleness = (
            None if par.max_staleness is None else max(par.max_staleness, ctx.dp_size - 1)
        )
        #: async: rank 0's step ends in a meeting, and the workers its replies have told so
        self.closing = False
        self.told: set[int] = set()
        #: async: the job's step being completed (rank 0's; a worker's from the last reply),
        #: and (a worker) whether that reply asked it to meet
        self.job_step = 0
        self.meeting_asked = False
        self._store: dist.Store | None = None
        #: a dedicated async server: tickets of the arrival queue read, and per worker
        self.head = 0
        self.arrived = dict.fromkeys(self.workers, 0)

    def forward_backward(self, batches: list[Batch]) -> torch.Tensor | None:
        """This replica's mean loss; gradients stay local (a dedicated server has neither)."""
        if self.ctx.serves_only:
            return None
        self.loss = self.local.forward_backward(batches)
        return self.loss

    def grad_norm(self) -> torch.Tensor:
        """Norm of the gradients held now (after an exchange: the averaged ones)."""
        return self.local.grad_norm()

    def update(
        self,
        optimizer_step: OptimizerStep,
        *,
        step: int,
        meeting: bool = False,
        measure: bool = True,
    ) -> tuple[torch.Tensor | None, dict[str, Value]]:
        """Apply this step's gradients as the mode says; the gradient norm and traffic metrics.

        `optimizer_step` unscales, clips, steps and zeroes the gradients (the Trainer's own);
        `step` is the 1-based step being completed; `meeting`: this rank's step ends in a
        report (async: rank 0's decides, and its replies tell the workers); `measure`: this
        step takes the gradient norm (a worker's own; else None).
        """
        self.exchange = Exchange()
        self.updates += 1
        if self.ctx.world_size == 1:
            norm = optimizer_step()
        elif self.mode == "sync/parameter_server":
            norm = self._sync_server(optimizer_step) if self.server else self._worker(measure)
        elif self.mode == "async":
            if self.server:
                self.closing, self.job_step = meeting, step
                serve = self._dedicated_server if self.dedicated else self._async_server
                norm = serve(optimizer_step)
            else:
                norm = self._worker(measure, async_=True)
        else:
            norm = optimizer_step()
            if step % self.sync_every == 0:
                self._average_parameters()
        return norm, self.exchange.row(server=self.server and self.mode == "async")

    # -- the parameter server -------------------------------------------------------------

    def _sync_server(self, optimizer_step: OptimizerStep) -> torch.Tensor | None:
        # a dedicated server starts from nothing: 0 + g1 + g2 is g1 + g2, bit for bit
        total = self._empty(self.grad_numel).zero_() if self.dedicated else self._flat_grads()
        # one inbox, filled worker after worker: rank 0 holds one extra gradient, not N-1
        # (its link is the bottleneck either way); rank order gives the same sum every run
        inbox = torch.empty_like(total)
        for worker in self.workers:
            dist.recv(inbox, src=worker, tag=GRAD_TAG)
            total += inbox
        self.exchange.received += len(self.workers) * _nbytes(total)
        total.div_(self.ctx.dp_size)
        if self.dedicated:  # the workers' mean loss: the global batch's
            self.exchange.loss = total[-1:].clone()
        self._set_grads(total)
        norm = optimizer_step()
        self._send_weights(list(self.workers))
        return norm

    def _dedicated_server(self, optimizer_step: OptimizerStep) -> torch.Tensor | None:
        """A dedicated async server's step: the next dp_size gradients to arrive (a global
        batch's worth, from whichever workers send them), each applied on its own; the last
        one's norm."""
        ex = self.exchange
        ex.queued += self._announced() - sum(self.served.values())
        # a meeting's replies tell each worker once, and a told worker sends nothing more
        while ex.applied < self.ctx.dp_size and not (
            self.closing and len(self.told) == len(self.workers)
        ):
            worker = self._next_arrival()
            if self.arrived[worker] <= self.served[worker]:
                continue  # a ticket of a gradient already taken (at a meeting or the bound)
            self._apply_from(worker, optimizer_step)
        assert ex.loss_sum is not None, "a step applies a gradient"
        ex.loss = ex.loss_sum / ex.applied
        return ex.norm

    def _next_arrival(self) -> int:
        """The worker of the next ticket in the arrival queue, waiting until it is taken."""
        self.head += 1
        store, key = self._the_store(), QUEUE_KEY.format(ticket=self.head)
        worker = int(store.get(key))  # the store's get waits for the key
        store.delete_key(key)
        self.arrived[worker] += 1
        return worker

    def _announced(self) -> int:
        return int(self._the_store().add(QUEUE_TAIL, 0))

    def _async_server(self, optimizer_step: OptimizerStep) -> torch.Tensor | None:
        if self._most_urgent() is not None:  # a worker at the staleness bound goes first
            own = self._flat_grads()
            self._make_room(optimizer_step)
            self._set_grads(own)
        norm = optimizer_step()  # its own gradient
        self.version += 1
        if self.closing:  # the meeting serves each worker once, with the flag to meet
            return norm
        waiting = [w for w in self.workers if self._ready(w) > self.served[w]]
        self.exchange.queued += len(waiting)
        for worker in waiting:
            self._apply_from(worker, optimizer_step, only_waiting=True)
        return norm

    def _most_urgent(self, besides: int | None = None) -> int | None:
        """The worker to serve before one more update, or None: the bound allows it.

        Earliest deadline first: the untold workers sorted by the version they hold; the
        i-th of them can be served i updates from now at the soonest, so one more update is
        allowed only while each has more than i updates of slack left under the bound.
        """
        if self.max_staleness is None:
            return None
        pending = sorted(
            (self.based_on[w], w) for w in self.workers if w not in self.told and w != besides
        )
        for i, (based_on, _) in enumerate(pending):
            if self.max_staleness - (self.version - based_on) <= i:
                return pending[0][1]
        return None

    def _make_room(self, optimizer_step: OptimizerStep, besides: int | None = None) -> None:
        """Serve the oldest workers (waiting for their gradients) until one more update fits."""
        while (worker := self._most_urgent(besides)) is not None:
            self._apply_from(worker, optimizer_step)

    def _apply_from(
        self,
        worker: int,
        optimizer_step: OptimizerStep,
        *,
        only_waiting: bool = False,
    ) -> None:
        """Receive `worker`'s gradient (waiting for it if need be), apply it, send the weights;
        the applied gradient's norm goes to the step's exchange."""
        if only_waiting and self._ready(worker) <= self.served[worker]:
            return  # the bound had rank 0 serve it already
        # room first: nothing may be applied between this worker's recv and its update, so
        # its staleness is what the bound allowed when it was served
        served = self.served[worker]
        self._make_room(optimizer_step, besides=worker)
        if self.served[worker] != served:
            return  # the room made served this very worker (its next gradient may not come)
        grads = self._empty(self.grad_numel)
        dist.recv(grads, src=worker, tag=GRAD_TAG)
        self.exchange.received += _nbytes(grads)
        self.served[worker] += 1
        if self.dedicated:  # the step's loss is the mean of its gradients' losses
            loss, ex = grads[-1:].clone(), self.exchange
            ex.loss_sum = loss if ex.loss_sum is None else ex.loss_sum + loss
        self._set_grads(grads)
        norm = optimizer_step()
        staleness = self.version - self.based_on[worker]
        self.version += 1
        ex = self.exchange
        ex.norm = norm
        ex.applied, ex.staleness_sum = ex.applied + 1, ex.staleness_sum + staleness
        ex.staleness_max = max(ex.staleness_max, staleness)
        self.based_on[worker] = self.version
        if self.closing:
            self.told.add(worker)
        self._send_weights([worker], flag=MEET if self.closing else GO_ON)

    def _worker(self, measure: bool, *, async_: bool = False) -> torch.Tensor | None:
        """Send this replica's gradient to rank 0 and take the weights it sends back."""
        grads = self._flat_grads(with_loss=self.dedicated)
        # this replica's own (`measure`: this step takes one); rank 0 reports the applied one
        norm = self.local.grad_norm() if measure else None
        if async_:
            self._raise_ready()
        dist.send(grads, dst=0, tag=GRAD_TAG)
        self.exchange.sent += _nbytes(grads)
        for p in self.params:
            p.grad = None
        if async_:
            header = torch.empty(2, dtype=torch.int64, device=grads.device)
            dist.recv(header, src=0, tag=HEADER_TAG)
            self.exchange.received += _nbytes(header)
            step, flag = header.tolist()
            self.job_step, self.meeting_asked = int(step), flag == MEET
        weights = self._empty(self.numel)
        dist.recv(weights, src=0, tag=WEIGHT_TAG)
        self.exchange.received += _nbytes(weights)
        self._set_weights(weights)
        return norm

    def _send_weights(self, workers: list[int], flag: int | None = None) -> None:
        weights = _flatten_dense_tensors([p.detach() for p in self.params])
        works = []
        if flag is not None:  # async: the step and go-on-or-meet first
            header = torch.tensor([self.job_step, flag], dtype=torch.int64, device=weights.device)
            works += [dist.isend(header, dst=w, tag=HEADER_TAG) for w in workers]
            self.exchange.sent += len(workers) * _nbytes(header)
        works += [dist.isend(weights, dst=w, tag=WEIGHT_TAG) for w in workers]
        _wait(works)
        self.exchange.sent += len(workers) * _nbytes(weights)

    def _ready(self, worker: int) -> int:
        """How many gradients `worker` has announced (the store's counter; no wait)."""
        return int(self._the_store().add(READY_KEY.format(rank=worker), 0))

    def _raise_ready(self) -> None:
        if self.dedicated:  # a ticket in the arrival queue the server blocks on
            ticket = self._the_store().add(QUEUE_TAIL, 1)
            self._the_store().set(QUEUE_KEY.format(ticket=ticket), str(self.ctx.rank))
            return
        self._the_store().add(READY_KEY.format(rank=self.ctx.rank), 1)

    def _the_store(self) -> dist.Store:
        if self._store is None:
            self._store = dist.distributed_c10d._get_default_store()
        return self._store

    # -- meeting points: reports and checkpoints ------------------------------------------

    def meeting(self, wanted: bool) -> bool:
        """Whether this rank's step ends in a report: its own rule (`wanted`), but an async
        worker's is rank 0's, told in the reply."""
        if self.mode != "async" or self.ctx.world_size == 1 or self.server:
            return wanted
        return self.meeting_asked

    def meet(self, optimizer_step: OptimizerStep, *, step: int) -> int:
        """Before a report (async): rank 0 applies each worker's next gradient, answering
        "meet", then broadcasts its weights and step; every rank returns the job's step."""
        if self.mode != "async" or self.ctx.world_size == 1:
            return step
        if self.server:
            self.closing = True
            for worker in self.workers:
                if worker not in self.told:
                    self._apply_from(worker, optimizer_step)
            self.closing, self.told = False, set()
            self.based_on = dict.fromkeys(self.workers, self.version)
        weights = _flatten_dense_tensors([p.detach() for p in self.params])
        dist.broadcast(weights, src=0)
        if self.server:
            self.exchange.sent += _nbytes(weights)
        else:
            self.exchange.received += _nbytes(weights)
            self._set_weights(weights)
            self.meeting_asked = False
        return self.job_step  # a worker's from the reply that asked it to meet

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

    def _flat_grads(self, *, with_loss: bool = False) -> torch.Tensor:
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        if with_loss:  # one more number at the end: this replica's loss
            assert self.loss is not None, "a worker computed its loss before sending"
            grads.append(self.loss.detach().reshape(1).to(self.params[0].dtype))
        return _flatten_dense_tensors(grads)

    def _set_grads(self, flat: torch.Tensor) -> None:
        """The parameters' gradients, views of `flat` (a loss after them is left out)."""
        parts = _unflatten_dense_tensors(flat[: self.numel], self.params)
        for p, grad in zip(self.params, parts, strict=True):
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
    runner: object,
    optimizer_step: OptimizerStep,
    *,
    step: int,
    meeting: bool,
    measure: bool = True,
) -> tuple[torch.Tensor | None, dict[str, Value]]:
    """The optimizer step of `step` under the runner's update mode, and its traffic metrics.

    The gradient norm: `optimizer_step`'s, or a worker's own when `measure` (else None).
    """
    if isinstance(runner, UpdateRunner):
        return runner.update(optimizer_step, step=step, meeting=meeting, measure=measure)
    traffic = getattr(runner, "traffic", None)
    if isinstance(traffic, AllreduceTraffic):
        return optimizer_step(), traffic.take().row(server=False)
    return optimizer_step(), {}


def next_step(runner: object, step: int) -> int:
    """The job's step after this rank's step: one more, but an async worker's is rank 0's."""
    if isinstance(runner, UpdateRunner) and not leads(runner):
        return runner.job_step
    return step + 1


def leads(runner: object) -> bool:
    """Whether this rank's steps are the job's steps (all but an async worker's)."""
    return not (
        isinstance(runner, UpdateRunner)
        and runner.mode == "async"
        and runner.ctx.world_size > 1
        and not runner.server
    )


def meeting(runner: object, wanted: bool) -> bool:
    """Whether this rank's step ends in a report: `wanted` (its own rule) but for async
    workers, whom rank 0 tells."""
    if isinstance(runner, UpdateRunner):
        return runner.meeting(wanted)
    return wanted


def meet(runner: object, optimizer_step: OptimizerStep, *, step: int) -> int:
    """Before a report's collective: async ranks catch up with rank 0; the job's step."""
    if isinstance(runner, UpdateRunner):
        return runner.meet(optimizer_step, step=step)
    return step


def settle(runner: object, optimizer: torch.optim.Optimizer, *, step: int) -> None:
    """Before a checkpoint: replicas agree on weights and optimizer state."""
    if isinstance(runner, UpdateRunner):
        runner.settle(optimizer, step=step)


class AllreduceTraffic:
    """DDP's bytes: a communication hook counts each bucket handed to the all-reduce.

    The hook is `allreduce_hook`'s arithmetic (divide by the world size, sum), which DDP
    documents as giving the results of no hook; it runs once per bucket per step, in the
    backward. Counted: the bucket's payload, as for local SGD's all-reduce (a ring moves
    about 2(N-1)/N of it each way on the wire).
    """

    def __init__(self) -> None:
        self.bytes = 0

    def hook(
        self, group: dist.ProcessGroup | None, bucket: dist.GradBucket
    ) -> torch.futures.Future[torch.Tensor]:
        """DDP's communication hook: count the bucket, then average it over the group."""
        buffer = bucket.buffer()
        self.bytes += _nbytes(buffer)
        return default_hooks.allreduce_hook(group, bucket)  # type: ignore[arg-type]

    def take(self) -> Exchange:
        """This step's bytes (since the last take), as an Exchange row."""
        moved, self.bytes = self.bytes, 0
        return Exchange(sent=moved, received=moved)
