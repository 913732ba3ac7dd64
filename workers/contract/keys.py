"""Names in Redis, per deployment: two Trainboards (or a reset data dir) on one Redis never meet.

Every key, stream, channel and Celery queue of a deployment is named
`tb:<deployment id>:<name>` (the id is made once and stored in the control plane's
database). Both sides compute names here: the control plane from its own id, a worker from
the id its registration returned, a supervisor from the id in its attempt order.
`Keys()` (no id) gives the plain `tb:<name>` names of code that has no deployment.
"""

from __future__ import annotations

from dataclasses import dataclass

from workers.contract.protocol import ALL_STREAMS, control_key, node_queue

MARKER_PREFIX = "trainboard:deployment:"
_BASE = "tb:"


def deployment_marker(deployment: str) -> str:
    """The key a control plane keeps in its Redis so its workers know they share it."""
    return f"{MARKER_PREFIX}{deployment}"


@dataclass(frozen=True)
class Keys:
    """The Redis names of one deployment."""

    deployment: str = ""

    def name(self, base: str) -> str:
        """A `tb:<name>` name of this deployment."""
        if not self.deployment or not base.startswith(_BASE):
            return base
        return f"{_BASE}{self.deployment}:{base[len(_BASE) :]}"

    def stream(self, kind: str) -> str:
        """The stream of one kind of item (a `*_STREAM` constant of the protocol)."""
        return self.name(kind)

    def streams(self) -> dict[str, str]:
        """Every telemetry stream: kind → this deployment's stream name."""
        return {kind: self.stream(kind) for kind in ALL_STREAMS}

    def control(self, attempt_id: int) -> str:
        """The key holding a stop request for an attempt's supervisor."""
        return self.name(control_key(attempt_id))

    def node_queue(self, node: str) -> str:
        """The Celery queue of one node."""
        queue = node_queue(node)
        return f"{_BASE}{self.deployment}:{queue}" if self.deployment else queue
