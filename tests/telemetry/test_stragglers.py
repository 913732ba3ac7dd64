"""Straggler detection on stored step_time points: the slow rank is flagged once, with its place."""

from __future__ import annotations

from sqlalchemy import select

from backend.db import Database
from backend.health.stragglers import flag_stragglers
from backend.jobs.models import Attempt, AttemptSlice, JobEvent
from backend.telemetry.models import MetricPoint
from tests.telemetry.helpers import add_attempt


def two_rank_attempt(database: Database, step_times: dict[int, float], steps: int = 20) -> int:
    """A running two-rank attempt on node-a devices 3 and 5 with these per-rank step times."""
    job_id, attempt_id = add_attempt(database)
    with database.session() as session:
        attempt = session.get(Attempt, attempt_id)
        assert attempt is not None
        attempt.devices = [3, 5]
        session.add(
            AttemptSlice(attempt_id=attempt_id, node_name="node-a", node_rank=0, devices=[3, 5])
        )
        session.add_all(
            MetricPoint(
                attempt_id=attempt_id,
                rank=rank,
                step=step,
                name="step_time",
                value=seconds * (1 + 0.01 * (step % 3)),
                time=1_700_000_000.0 + step,
            )
            for rank, seconds in step_times.items()
            for step in range(1, steps + 1)
        )
    return attempt_id


def straggler_events(database: Database) -> list[str]:
    with database.session() as session:
        query = select(JobEvent.message).where(JobEvent.kind == "straggler")
        return list(session.scalars(query))


def test_a_rank_50_ms_slower_per_step_is_flagged_once_with_its_node_and_device(
    database: Database,
) -> None:
    two_rank_attempt(database, {0: 0.010, 1: 0.060})

    for _ in range(2):
        with database.session() as session:
            flag_stragglers(session)

    [message] = straggler_events(database)
    assert message.startswith("rank 1 on node node-a device 5 is a straggler: median step time")


def test_even_ranks_and_too_few_points_are_not_flagged(database: Database) -> None:
    two_rank_attempt(database, {0: 0.010, 1: 0.012})
    two_rank_attempt(database, {0: 0.010, 1: 0.060}, steps=5)
    with database.session() as session:
        assert flag_stragglers(session) == []
    assert straggler_events(database) == []
