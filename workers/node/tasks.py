"""The Celery task that runs one attempt: claim → supervise → finish."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from celery import Celery
from pydantic import ValidationError

from workers.contract.protocol import RUN_ATTEMPT_TASK, AttemptOrder, AttemptOutcome
from workers.devices.registry import DeviceRegistry
from workers.node.api_client import NodeApiClient
from workers.node.provenance import send_provenance
from workers.node.rendezvous import PortUnknown, await_port, claim_attempt
from workers.node.settings import WorkerSettings
from workers.supervisor.attempt import Supervisor
from workers.supervisor.job_user import IsolationError
from workers.supervisor.outcome import NOT_COUNTED
from workers.supervisor.settings import SupervisorSettings

log = logging.getLogger(__name__)


class ActiveAttempts:
    """The supervisors running on this node, so a shutdown can stop them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[Supervisor] = set()
        self.closing = False
        #: whether the shutdown is the platform's own (a node agent stopping), which spends
        #: no restart of the job's; a supervisor under Slurm is signalled for the job's sake
        #: too (its time limit), so its stops count as before
        self.platform_stop = True

    def add(self, supervisor: Supervisor) -> bool:
        """Track a supervisor; False once the node is shutting down."""
        with self._lock:
            if self.closing:
                return False
            self._running.add(supervisor)
            return True

    def discard(self, supervisor: Supervisor) -> None:
        """Forget a supervisor whose attempt ended."""
        with self._lock:
            self._running.discard(supervisor)

    def running(self) -> list[int]:
        """The attempts whose ranks this node runs now."""
        with self._lock:
            return sorted(s.order.attempt_id for s in self._running)

    def kill(self, attempt_ids: Iterable[int], reason: str) -> None:
        """Kill these attempts' ranks now (the node no longer owns them)."""
        wanted = set(attempt_ids)
        with self._lock:
            fenced = [s for s in self._running if s.order.attempt_id in wanted]
        for supervisor in fenced:
            supervisor.fence(reason)

    def kill_all(self, reason: str) -> None:
        """Kill every running attempt's ranks now (this node was declared lost)."""
        self.kill(self.running(), reason)

    def shutdown_all(self, *, platform_stop: bool = True, reason: str | None = None) -> None:
        """Refuse new attempts and ask every running supervisor to stop its ranks (`reason`:
        why the platform stops them, if not this node shutting down)."""
        with self._lock:
            self.closing = True
            self.platform_stop = platform_stop
            running = list(self._running)
        for supervisor in running:
            supervisor.shutdown(platform_stop=platform_stop, reason=reason)


def run_attempt(
    order_json: dict[str, Any],
    *,
    settings: WorkerSettings,
    supervisor_settings: SupervisorSettings,
    api: NodeApiClient,
    registry: DeviceRegistry,
    active: ActiveAttempts,
    use_gpus: bool,
    lease: Callable[[], bool] = lambda: True,
) -> str:
    """Claim the attempt, run its ranks, report the outcome; return what happened."""
    try:
        order = AttemptOrder.model_validate(order_json)
    except ValidationError as err:
        log.error("dropping malformed attempt order: %s", err)
        return "malformed"
    if order.node != settings.node_name:
        log.error("attempt %d is for node %r, not this one", order.attempt_id, order.node)
        return "wrong-node"
    claim = claim_attempt(api, order, settings.node_name)
    if not claim.won:
        log.info("attempt %d: claim refused (stale, duplicate or cancelled)", order.attempt_id)
        return "refused"
    order = order.model_copy(update={"master_port": claim.master_port or 0})

    def report(outcome: AttemptOutcome) -> str:
        log.info("attempt %d: %s %s", order.attempt_id, outcome.outcome, outcome.reason or "")
        api.finish(order.attempt_id, outcome.model_copy(update={"node": settings.node_name}))
        return outcome.outcome

    try:
        supervisor = Supervisor(
            order, supervisor_settings, registry=registry, use_gpus=use_gpus, lease=lease
        )
    except IsolationError as err:  # no uid for the job on this node: not the job's fault
        return report(AttemptOutcome(outcome="failed", reason=str(err), platform_fault=True))
    if order.node_rank == 0:  # what it runs, recorded beside the ranks' start
        threading.Thread(
            target=send_provenance,
            args=(api, order, supervisor_settings, settings.node_name, supervisor.containment),
            name=f"provenance-{order.attempt_id}",
            daemon=True,
        ).start()

    if not active.add(supervisor):
        if not active.platform_stop:
            return report(supervisor.refuse("the attempt's supervisor was told to stop"))
        # a platform stop: not the job's, no restart spent
        refused = supervisor.refuse(f"the worker node is shutting down; {NOT_COUNTED}")
        return report(refused.model_copy(update={"platform_fault": True}))
    try:
        # listed while it waits: the heartbeat tells the control plane this node runs it
        port = claim.master_port or await_port(api, order, stopping=lambda: active.closing)
    except PortUnknown as err:
        active.discard(supervisor)
        refused = supervisor.refuse(str(err))  # not the job's fault: not counted
        return report(refused.model_copy(update={"platform_fault": True}))
    supervisor.master_port = port  # the gang's port, chosen by the node of rank 0
    try:
        # reported while still listed: a heartbeat between the ranks' exit and the finish
        # report would otherwise say the node no longer runs it, and end it as lost
        return report(supervisor.run())
    finally:
        active.discard(supervisor)


def register_tasks(app: Celery, **deps: Any) -> None:
    """Register RUN_ATTEMPT_TASK on app, bound to this node's settings, API client and registry."""

    @app.task(name=RUN_ATTEMPT_TASK, ignore_result=True)
    def _run_attempt(order_json: dict[str, Any]) -> str:
        return run_attempt(order_json, **deps)
