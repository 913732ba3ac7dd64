"""The states of attempts and their per-node slices, and which of them book devices.

One rule lives here: a device is booked only by a slice in a live state of a live
attempt. Whatever ends an attempt ends every slice of it in the same transaction
(`backend.jobs.attempts.end_attempt`), so booking is "the slice is live".
"""

from __future__ import annotations

from enum import StrEnum


class AttemptState(StrEnum):
    """An attempt: one start of a job, from placement to its end."""

    scheduled = "scheduled"  # placed, its slices sent to their nodes, none claimed yet
    running = "running"  # at least one node claimed its slice
    succeeded = "succeeded"
    failed = "failed"
    stopped = "stopped"  # ended on a cancel or pause request
    lost = "lost"  # a node of it was lost, or restarted as a new incarnation
    withdrawn = "withdrawn"  # ended by the control plane before it ran (never claimed)


class SliceState(StrEnum):
    """One node's part of an attempt."""

    scheduled = "scheduled"  # sent to the node, not claimed yet
    running = "running"  # claimed: the node runs its ranks
    succeeded = "succeeded"
    failed = "failed"
    stopped = "stopped"
    lost = "lost"  # its node was lost or restarted
    withdrawn = (
        "withdrawn"  # the attempt ended without this node's report: the node must not run it
    )


LIVE_ATTEMPT = frozenset({AttemptState.scheduled, AttemptState.running})
LIVE_SLICE = frozenset({SliceState.scheduled, SliceState.running})
#: as plain strings, for SQL `IN (...)` clauses
LIVE_ATTEMPT_VALUES = tuple(sorted(s.value for s in LIVE_ATTEMPT))
#: ended by the control plane, not by their own ranks: what they report afterwards is not taken
FENCED_ATTEMPT_VALUES = (AttemptState.lost.value, AttemptState.withdrawn.value)
LIVE_SLICE_VALUES = tuple(sorted(s.value for s in LIVE_SLICE))


class NodeState(StrEnum):
    """A worker node as the control plane sees it."""

    up = "up"
    lost = "lost"  # its heartbeat expired; its attempts were ended
    misconfigured = "misconfigured"  # it heartbeats but cannot receive work (see its reason)
