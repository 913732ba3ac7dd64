"""Which actions a job accepts follows from the one transition table (the UI offers these)."""

from __future__ import annotations

import pytest

from backend.jobs.states import TRANSITIONS, JobAction, JobState, allowed_actions

A, S = JobAction, JobState


@pytest.mark.parametrize(
    ("state", "actions"),
    [
        (S.queued, {A.cancel, A.pause, A.clone}),
        (S.scheduled, {A.cancel, A.pause, A.clone}),
        (S.running, {A.cancel, A.pause, A.clone}),
        (S.restarting, {A.cancel, A.pause, A.clone}),  # waiting out its back-off
        (S.pausing, {A.cancel, A.clone}),
        (S.cancelling, {A.clone}),
        (S.paused, {A.cancel, A.resume, A.clone}),
        (S.failed, {A.resume, A.clone}),
        (S.cancelled, {A.resume, A.clone}),
        (S.stopped, {A.resume, A.clone}),  # by a sweep's early-stopping rule
        (S.succeeded, {A.clone}),
    ],
)
def test_each_state_offers_exactly_its_actions(state: JobState, actions: set[JobAction]) -> None:
    assert set(allowed_actions(state)) == actions


def test_every_state_is_covered() -> None:
    assert set(TRANSITIONS) == set(JobState)
