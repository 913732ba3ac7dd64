"""Directions jobs declared for their metrics (the SDK's `sdk.declare`), read from events."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.jobs.models import JobEvent
from workers.contract.telemetry_channel import DIRECTION_EVENT, parse_direction


def declared(session: Session, *, job_ids: Collection[int]) -> dict[int, dict[str, str]]:
    """Job id → metric name → declared direction ("min", "max", "none"); the newest wins."""
    out: dict[int, dict[str, str]] = {}
    if not job_ids:
        return out
    query = (
        select(JobEvent.job_id, JobEvent.message)
        .where(JobEvent.job_id.in_(list(job_ids)), JobEvent.kind == DIRECTION_EVENT)
        .order_by(JobEvent.id)
    )
    for job_id, message in session.execute(query):
        parsed = parse_direction(message)
        if parsed is not None:
            out.setdefault(job_id, {})[parsed[0]] = parsed[1]
    return out
