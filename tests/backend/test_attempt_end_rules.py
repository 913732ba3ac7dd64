"""What a job does after its attempt ends is decided once, by one ordered rule list.

A node's finish report and the control plane's own ends (a lost node, a withdrawn claim)
both go through `advance_job`; the same situation gives the same next state either way.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from sqlalchemy import select

from backend.config import Settings
from backend.db import Database
from backend.jobs import attempts
from backend.jobs.attempt_end import RULES, AttemptEnd, advance_job, end_attempt
from backend.jobs.attempt_states import AttemptState
from backend.jobs.models import Attempt, AttemptSlice, Job, JobEvent
from tests.telemetry.helpers import add_attempt
from workers.contract.protocol import AttemptOutcome, StopRequest

S = AttemptState
CASES: list[tuple[dict[str, Any], AttemptEnd, str, str]] = [
    ({}, AttemptEnd(S.succeeded), "every step done: succeeded", "succeeded"),
    (
        {"early_stop": "stopped early at rung 1"},
        AttemptEnd(S.succeeded),
        "every step done: succeeded",
        "succeeded",
    ),
    (
        {"stop_request": StopRequest.preempt, "state": "pausing", "preempted_by": 9},
        AttemptEnd(S.stopped),
        "preempted: queued again",
        "queued",
    ),
    (
        {"stop_request": StopRequest.cancel, "state": "cancelling"},
        AttemptEnd(S.stopped),
        "cancel asked (early stop included): cancelled or stopped",
        "cancelled",
    ),
    (
        {
            "stop_request": StopRequest.cancel,
            "state": "cancelling",
            "early_stop": "stopped early at rung 1",
        },
        AttemptEnd(S.lost, "node n1 stopped heartbeating", platform_fault=True),
        "cancel asked (early stop included): cancelled or stopped",
        "stopped",
    ),
    (
        {"stop_request": StopRequest.pause, "state": "pausing"},
        AttemptEnd(S.failed, "rank 0 exited 1"),
        "pause asked: paused",
        "paused",
    ),
    (
        {},
        AttemptEnd(S.stopped, "disk full", pause=True),
        "its policy stopped it (a full disk): paused",
        "paused",
    ),
    (
        {"state": "scheduled"},
        AttemptEnd(S.withdrawn, "node n1 did not claim its part", platform_fault=True),
        "no node claimed it: placed again",
        "queued",
    ),
    (
        {},
        AttemptEnd(S.failed, "refused checkpoint", final=True),
        "a failure no restart can fix: failed",
        "failed",
    ),
    ({}, AttemptEnd(S.failed, "rank 0 exited 1"), "anything else: restart or fail", "restarting"),
    (
        {},
        AttemptEnd(S.lost, "node n1 stopped heartbeating", platform_fault=True),
        "anything else: restart or fail",
        "restarting",
    ),
]


@pytest.mark.parametrize(("job_fields", "end", "rule", "state"), CASES)
def test_each_end_meets_the_first_rule_that_applies(
    database: Database, job_fields: dict[str, Any], end: AttemptEnd, rule: str, state: str
) -> None:
    job_id, attempt_id = add_attempt(database)
    with database.session() as session:
        job = session.get_one(Job, job_id)
        job.attempt = 1
        for name, value in job_fields.items():
            setattr(job, name, value)
        attempt = session.get_one(Attempt, attempt_id)
        assert advance_job(session, job, attempt, end) == rule
        assert job.state == state
        if state == "succeeded":
            assert job.early_stop is None  # never "succeeded" beside "stopped early"


def test_every_rule_is_reached_by_some_end() -> None:
    assert {rule for _, _, rule, _ in CASES} == {name for name, _, _ in RULES}


@pytest.mark.parametrize("source", ["node report", "control plane"])
def test_an_early_stopped_trial_ends_stopped_whichever_side_saw_its_attempt_end(
    database: Database, settings: Settings, source: str
) -> None:
    """Before, a node's report and a lost node decided a cancelled trial's end apart."""
    client = redis.Redis.from_url(settings.redis_url)
    job_id, attempt_id = add_attempt(database)
    with database.session() as session:
        job = session.get_one(Job, job_id)
        job.attempt, job.state = 1, "cancelling"
        job.stop_request, job.early_stop = StopRequest.cancel, "stopped early at rung 1"
        session.add(
            AttemptSlice(
                attempt_id=attempt_id, node_name="node-a", node_rank=0, devices=[0], state="running"
            )
        )
        session.commit()
    with database.session() as session:
        if source == "node report":
            report = AttemptOutcome(outcome="stopped", exit_codes=[143])
            attempts.finish(session, client, attempt_id=attempt_id, node="node-a", outcome=report)
        else:
            attempt = session.get_one(Attempt, attempt_id)
            end_attempt(session, client, attempt, state=S.lost, reason="node-a lost")
            session.commit()
    with database.session() as session:
        job = session.get_one(Job, job_id)
        assert (job.state, job.reason) == ("stopped", "stopped early at rung 1")
        states = session.scalars(select(AttemptSlice.state)).all()
        assert states and all(s != "running" for s in states)


def test_a_platform_stop_reads_as_the_platforms_and_spends_no_restart(database: Database) -> None:
    """#33: a node that lost the API for 14 s stopped its ranks; the page read "fenced: no
    answer from the control plane" beside a restart count, as if the job had failed."""
    why = (
        "Trainboard's API did not answer this node for 14 s, so the node stopped the job's ranks; "
        "not counted against max_restarts: it resumes from its newest checkpoint"
    )
    job_id, attempt_id = add_attempt(database)
    with database.session() as session:
        job = session.get_one(Job, job_id)
        job.attempt, job.spec = 1, {**job.spec, "max_restarts": 2}
        attempt = session.get_one(Attempt, attempt_id)
        advance_job(session, job, attempt, AttemptEnd(S.failed, why, platform_fault=True))
        assert (job.state, job.restarts, job.reason) == ("restarting", 0, why)
        event = session.scalars(select(JobEvent).order_by(JobEvent.id.desc())).first()
        assert event is not None and event.kind == "restarting"
        assert event.message.startswith("restarting in ")
        said = "(not counted: a platform fault, not the job's; 0 of 2 automatic restarts used)"
        assert said in event.message and event.message.endswith(f"after: {why}")
        assert "fenced" not in event.message

        # the job's own failure is counted, and says which restart it is
        job.state = "running"
        advance_job(session, job, attempt, AttemptEnd(S.failed, "exit code 1"))
        assert job.restarts == 1
        event = session.scalars(select(JobEvent).order_by(JobEvent.id.desc())).first()
        assert event is not None and "(restart 1 of 2) after: exit code 1" in event.message
