"""What a websocket client receives first when it subscribes to a topic."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from backend.auth.service import Principal
from backend.jobs import service as jobs
from backend.jobs.cluster import describe_nodes
from backend.jobs.views import describe_job, describe_jobs
from backend.telemetry.series import queries, reads
from backend.telemetry.series.cache import SeriesCache


class TopicRefused(LookupError):
    """The topic does not exist or the caller may not read it."""


def snapshot(
    session: Session, *, principal: Principal, topic: str, cache: SeriesCache | None = None
) -> dict[str, Any]:
    """The current state of a topic, read from the database (through the series cache).

    A job's metrics are downsampled over the whole run (queries.snapshot_series); the
    deltas that follow carry every new point.
    """
    if topic == "jobs":
        listed = jobs.visible_jobs(session, principal=principal)
        return {"jobs": [j.model_dump(mode="json") for j in describe_jobs(session, listed)]}
    if topic == "cluster":
        return {
            "nodes": [n.model_dump(mode="json") for n in describe_nodes(session)],
            "samples": reads.recent_samples(session),
        }
    if topic.startswith("job:") and topic[4:].isdigit():
        try:
            job = jobs.get_job(session, principal=principal, job_id=int(topic[4:]))
        except jobs.JobNotFound as err:
            raise TopicRefused(str(err)) from None
        return {
            "job": describe_job(session, job).model_dump(mode="json"),
            "metrics": queries.snapshot_series(session, cache or SeriesCache(), job_id=job.id),
            "logs": reads.recent_logs(session, job_id=job.id),
        }
    raise TopicRefused(f"unknown topic {topic[:80]!r}")


def current_state(session: Session, *, principal: Principal, topic: str) -> dict[str, Any]:
    """A topic's state without its series (sent first when a client resumes)."""
    if topic == "cluster":
        return {"nodes": [n.model_dump(mode="json") for n in describe_nodes(session)]}
    if topic.startswith("job:") and topic[4:].isdigit():
        try:
            job = jobs.get_job(session, principal=principal, job_id=int(topic[4:]))
        except jobs.JobNotFound as err:
            raise TopicRefused(str(err)) from None
        return {"job": describe_job(session, job).model_dump(mode="json")}
    raise TopicRefused(f"unknown topic {topic[:80]!r}")
