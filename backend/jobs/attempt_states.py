"""The states of attempts and their per-node slices, which of them book devices, and the
one table of moves between them with the only functions that write them.

One rule lives here: a device is booked only by a slice in a live state of a live
attempt. Whatever ends an attempt ends every slice of it in the same transaction
(`backend.jobs.attempts.end_attempt`), so booking is "the slice is live".

Every change of an attempt's or a slice's state goes through `set_attempt_state` /
`set_slice_state` (an ORM row) or `attempt_move` / `slice_move` (the from/to pair of a
compare-and-set UPDATE), which refuse a move ATTEMPT_TRANSITIONS / SLICE_TRANSITIONS do not
hold. docs/architecture.md draws the tables (`state_diagram`, kept equal by
tests/backend/test_attempt_states.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Protocol, TypeVar


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


_A, _S = AttemptState, SliceState
#: every move an attempt makes: claimed, or ended by its ranks' report (succeeded, failed,
#: stopped) or by the control plane (lost, withdrawn); an ended attempt never moves again
ATTEMPT_TRANSITIONS: Mapping[AttemptState, frozenset[AttemptState]] = {
    _A.scheduled: frozenset({_A.running, _A.lost, _A.withdrawn}),
    _A.running: frozenset({_A.succeeded, _A.failed, _A.stopped, _A.lost, _A.withdrawn}),
    _A.succeeded: frozenset(),
    _A.failed: frozenset(),
    _A.stopped: frozenset(),
    _A.lost: frozenset(),
    _A.withdrawn: frozenset(),
}
#: every move a slice makes: claimed by its node, or ended by the node's report or with its
#: attempt (an unclaimed slice is withdrawn, a running one lost or withdrawn)
SLICE_TRANSITIONS: Mapping[SliceState, frozenset[SliceState]] = {
    _S.scheduled: frozenset({_S.running, _S.withdrawn}),
    _S.running: frozenset({_S.succeeded, _S.failed, _S.stopped, _S.lost, _S.withdrawn}),
    _S.succeeded: frozenset(),
    _S.failed: frozenset(),
    _S.stopped: frozenset(),
    _S.lost: frozenset(),
    _S.withdrawn: frozenset(),
}

_E = TypeVar("_E", AttemptState, SliceState)


class IllegalStateMove(ValueError):
    """An attempt or slice state change the transition table does not hold."""


class _HasState(Protocol):
    id: int
    state: str


def _checked(table: Mapping[_E, frozenset[_E]], what: str, frm: _E, to: _E) -> tuple[_E, _E]:
    if to not in table[frm]:
        raise IllegalStateMove(f"{what} {frm.value} cannot become {to.value}")
    return frm, to


def attempt_move(frm: AttemptState, to: AttemptState) -> tuple[AttemptState, AttemptState]:
    """(frm, to) for a compare-and-set UPDATE of attempts, or IllegalStateMove."""
    return _checked(ATTEMPT_TRANSITIONS, "an attempt", frm, to)


def slice_move(frm: SliceState, to: SliceState) -> tuple[SliceState, SliceState]:
    """(frm, to) for a compare-and-set UPDATE of slices, or IllegalStateMove."""
    return _checked(SLICE_TRANSITIONS, "a slice", frm, to)


def set_attempt_state(attempt: _HasState, to: AttemptState | str) -> None:
    """Move an attempt row to `to`, or raise IllegalStateMove (the row is left as it was)."""
    attempt_move(AttemptState(attempt.state), AttemptState(to))
    attempt.state = AttemptState(to).value


def set_slice_state(part: _HasState, to: SliceState | str) -> None:
    """Move a slice row to `to`, or raise IllegalStateMove (the row is left as it was)."""
    slice_move(SliceState(part.state), SliceState(to))
    part.state = SliceState(to).value


def state_diagram(title: str, table: Mapping[_E, frozenset[_E]], start: _E) -> str:
    """A Mermaid stateDiagram of a transition table (how docs/architecture.md draws it)."""
    lines = ["```mermaid", "---", f"title: {title}", "---", "stateDiagram-v2"]
    lines.append(f"    [*] --> {start.value}")
    for frm, targets in table.items():
        lines += [f"    {frm.value} --> {to.value}" for to in sorted(targets)]
        if not targets:
            lines.append(f"    {frm.value} --> [*]")
    lines.append("```")
    return "\n".join(lines)


def state_diagrams() -> str:
    """Both tables' diagrams, as docs/architecture.md holds them."""
    return "\n\n".join(
        [
            state_diagram("attempt states", ATTEMPT_TRANSITIONS, AttemptState.scheduled),
            state_diagram("slice states", SLICE_TRANSITIONS, SliceState.scheduled),
        ]
    )
