"""The executor boundary: the scheduler decides *what* runs, an executor *how* and *where*.

The scheduler loop (backend.scheduler.loop) derives the queue from the database, asks the
executor to place it, writes each placement's attempt and slices, and after the commit
hands the executor the orders to start. Everything about the machinery that runs ranks
(Celery tasks and node agents for the node pool, `sbatch`/`squeue`/`scancel` for Slurm)
lives behind this interface, in backend/executors/<name>/, and nowhere else.

What every executor shares (the attempt's record and lifecycle, backend.jobs.attempts and
backend.jobs.attempt_end; the supervisor, rank engine, telemetry and checkpoints) is not
its business: a supervisor started by any executor claims its slice, reports rendezvous
and its outcome to the same control-plane routes, and is stopped through the same
control key (backend.signals.request_stop).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from sqlalchemy.orm import Session

from backend.placement.policy import Plan, QueuedJob, Quota
from backend.placement.preemption import RunningJob
from workers.contract.protocol import AttemptOrder, StopRequest


class Executor(Protocol):
    """How attempts run. One per deployment, chosen by the operator (TRAINBOARD_EXECUTOR)."""

    #: the name an operator chooses it by ("nodes", "slurm")
    name: str

    def observe(self, session: Session) -> set[int]:
        """End the attempts this executor knows can no longer run (a lost node, a slice no
        one claimed, an allocation that ended without a report); the ids of the jobs moved.
        Runs at the start of every scheduling pass, in its transaction."""
        ...

    def quiet_until(self, session: Session) -> datetime | None:
        """With nothing in flight: the earliest moment `observe` may find something to end
        that no wake-up announces (a node's lease running out); None if nothing can. The
        scheduler skips its passes until then, unless woken."""
        ...

    def still_listening(self) -> None:
        """A pass skipped while idle (see `quiet_until`): the control plane listened now."""
        ...

    def place(
        self,
        session: Session,
        queue: Sequence[QueuedJob],
        *,
        running: Sequence[RunningJob],
        quotas: dict[int, Quota],
    ) -> Plan:
        """Which queued jobs start now and on what (node, devices) slices; why the rest wait."""
        ...

    def address_of(self, session: Session, node: str) -> str:
        """The address rank 0's node is reached at for the rendezvous ("" if the executor's
        supervisor learns it where it runs)."""
        ...

    def start(self, orders: Sequence[AttemptOrder]) -> None:
        """Start each slice's supervisor (after the pass committed its attempt)."""
        ...

    def stop(self, attempt_ids: Sequence[int], action: StopRequest) -> None:
        """Ask the attempts' supervisors to stop (checkpoint first unless cancelled)."""
        ...
