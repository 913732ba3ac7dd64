"""Attempt and slice states: one transition table each, one way to write them, and the
diagrams in docs/architecture.md generated from the tables (backend/jobs/attempt_states.py)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from backend.jobs.attempt_states import (
    ATTEMPT_TRANSITIONS,
    SLICE_TRANSITIONS,
    AttemptState,
    IllegalStateMove,
    SliceState,
    attempt_move,
    set_attempt_state,
    set_slice_state,
    slice_move,
    state_diagrams,
)
from tests.source_rules import violations

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
BLOCK = re.compile(r"<!-- run-states:begin[^>]*-->\n(.*?)\n<!-- run-states:end -->", re.S)
#: rows of other kinds whose `state` other modules write (jobs through backend.jobs.states)
OTHER_ROWS = {"job", "node", "delivery", "sweep"}
WRITER = ROOT / "backend" / "jobs" / "attempt_states.py"


@dataclass
class Row:
    id: int
    state: str


def test_the_docs_diagrams_are_the_tables() -> None:
    found = BLOCK.search(DOC.read_text())
    assert found is not None, "docs/architecture.md lost its run-states block"
    assert found.group(1) == state_diagrams(), (
        "regenerate the block between the run-states markers with "
        "backend.jobs.attempt_states.state_diagrams():\n" + state_diagrams()
    )


def test_every_state_has_a_row_and_an_ended_one_never_moves() -> None:
    assert set(ATTEMPT_TRANSITIONS) == set(AttemptState)
    assert set(SLICE_TRANSITIONS) == set(SliceState)
    for state in ("succeeded", "failed", "stopped", "lost", "withdrawn"):
        assert ATTEMPT_TRANSITIONS[AttemptState(state)] == frozenset()
        assert SLICE_TRANSITIONS[SliceState(state)] == frozenset()


def test_a_legal_move_is_written_and_an_illegal_one_refused_leaving_the_row() -> None:
    attempt = Row(1, "scheduled")
    set_attempt_state(attempt, AttemptState.running)
    set_attempt_state(attempt, "stopped")  # a node's report names its outcome as a string
    assert attempt.state == "stopped" and type(attempt.state) is str
    with pytest.raises(IllegalStateMove, match="stopped cannot become running"):
        set_attempt_state(attempt, AttemptState.running)
    assert attempt.state == "stopped"

    part = Row(2, "scheduled")
    with pytest.raises(IllegalStateMove):
        set_slice_state(part, SliceState.succeeded)  # never claimed: it cannot have finished
    assert part.state == "scheduled"
    set_slice_state(part, SliceState.withdrawn)
    assert part.state == "withdrawn"


def test_a_compare_and_set_gets_its_pair_from_the_table() -> None:
    assert attempt_move(AttemptState.scheduled, AttemptState.running) == ("scheduled", "running")
    assert slice_move(SliceState.scheduled, SliceState.withdrawn) == ("scheduled", "withdrawn")
    with pytest.raises(IllegalStateMove):
        attempt_move(AttemptState.lost, AttemptState.running)


def state_writes(source: str) -> list[int]:
    """Lines writing an attempt's or slice's state other than through attempt_states' writers:
    `x.state = ...` on a row that is not a job/node/delivery/sweep, or `.values(state=...)`
    naming an AttemptState/SliceState member (a compare-and-set not from the table)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            targets = [
                t
                for target in node.targets
                for t in (target.elts if isinstance(target, ast.Tuple) else [target])
            ]
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr == "state":
                    owner = t.value.id if isinstance(t.value, ast.Name) else None
                    if owner not in OTHER_ROWS:
                        found.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "values"
        ):
            for kw in node.keywords:
                value = kw.value
                if (
                    kw.arg == "state"
                    and isinstance(value, ast.Attribute)
                    and isinstance(value.value, ast.Name)
                    and value.value.id in ("AttemptState", "SliceState")
                ):
                    found.append(node.lineno)
    return sorted(found)


def test_no_attempt_or_slice_state_is_written_in_place() -> None:
    files = [f for f in (ROOT / "backend").rglob("*.py") if f != WRITER]
    bad = violations(files, state_writes)
    assert bad == [], "use backend.jobs.attempt_states.set_attempt_state / set_slice_state"


def test_the_checker_sees_an_in_place_write() -> None:
    sample = (
        "attempt.state = outcome.outcome\n"
        "part.state, part.finished_at = SliceState.withdrawn, now\n"
        "q = update(Attempt).values(state=AttemptState.running)\n"
        "job.state = to.value\n"
        "q = update(Attempt).values(state=to)\n"
        "q = update(Attempt).values(state=Attempt.state)\n"
    )
    assert state_writes(sample) == [1, 2, 3]
