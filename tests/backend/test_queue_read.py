"""A scheduling pass reads each queued job's gang size from its stored spec, in SQL.

Validating every queued spec into a JobSpec each pass was ~37% of a pass over 100k queued
jobs (#34); the pass needs only the node count of a queued job, and the contract's default
where a stored spec has none.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update

from backend.auth.models import User
from backend.db import Database
from backend.jobs.models import Job
from backend.scheduler.inputs import placed_jobs, queued_jobs
from tests.backend.test_claim_gang import settings  # noqa: F401 (on SQLite and PostgreSQL)
from workers.contract.spec import JobSpec


def add_job(database: Database, spec: dict[str, Any], *, state: str = "queued") -> int:
    with database.session() as session:
        owner = session.scalars(select(User.id).where(User.username == "alice")).one()
        job = Job(name="j", owner_id=owner, spec=spec, devices_requested=2, state=state)
        session.add(job)
        session.flush()
        return job.id


def test_each_queued_job_comes_with_the_nodes_its_gang_spans(
    database: Database, tokens: dict[str, str]
) -> None:
    two_nodes = JobSpec.model_validate(
        {"name": "g", "template": "mlp", "parallelism": {"devices": 2, "nodes": 2}}
    ).model_dump(mode="json")
    gang = add_job(database, two_nodes)
    minimal = {"name": "o", "template": "mlp"}
    older = add_job(database, minimal)  # stored before `nodes` existed
    add_job(database, two_nodes, state="running")

    with database.session() as session:
        queue = {job.id: job.nodes for job in queued_jobs(session)}
        assert queue == {gang: 2, older: JobSpec.model_validate(minimal).parallelism.nodes}

        placed = placed_jobs(session, [gang])  # once placed, its spec is read as any other
        assert placed[gang].spec_model.parallelism.nodes == 2


def test_a_job_cancelled_after_the_queue_was_read_is_not_placed(
    database: Database, tokens: dict[str, str]
) -> None:
    spec = {"name": "c", "template": "mlp"}
    kept, cancelled = add_job(database, spec), add_job(database, spec)
    with database.session() as session:
        assert {job.id for job in queued_jobs(session)} == {kept, cancelled}
        session.execute(update(Job).where(Job.id == cancelled).values(state="cancelled"))
        assert set(placed_jobs(session, [kept, cancelled])) == {kept}
