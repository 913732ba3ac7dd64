"""The rendezvous port of a gang: chosen by the node hosting rank 0 when it claims its slice.

A fixed port (torchrun's 29500, or the scheduler's old 29500 + attempt id) collides on a
busy host with other Trainboards' and other jobs' stores. The node hosting rank 0 asks its
OS for a port free there now and sends it with its claim; the other nodes learn it from
their claim's answer, or ask for it until that node has claimed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from workers.contract.protocol import AttemptOrder
from workers.node.api_client import Claim, NodeApiClient
from workers.supervisor.rank_launch import free_port

POLL_SECONDS = 0.5


class PortUnknown(RuntimeError):
    """The gang's port never became known: its rank 0's node did not claim in time."""


def claim_attempt(api: NodeApiClient, order: AttemptOrder, node: str) -> Claim:
    """Claim this node's slice; the node of rank 0 names a port that is free here now."""
    port = free_port() if order.node_rank == 0 else None
    return api.claim(order.attempt_id, node, master_port=port)


def await_port(api: NodeApiClient, order: AttemptOrder, *, stopping: Callable[[], bool]) -> int:
    """Wait (up to the spec's rendezvous bound) for the port rank 0's node chose."""
    bound = order.spec.parallelism.rendezvous_timeout_s
    deadline = time.monotonic() + bound
    while not stopping():
        port, live = api.rendezvous(order.attempt_id)
        if port is not None:
            return port
        if not live:
            raise PortUnknown("the attempt ended before its node rank 0 claimed it")
        if time.monotonic() >= deadline:
            raise PortUnknown(
                f"rendezvous failed: the node hosting rank 0 did not claim attempt "
                f"{order.number} within {bound:g} s, so its port is unknown"
            )
        time.sleep(POLL_SECONDS)
    raise PortUnknown("the worker node is shutting down")
