"""Repeated stragglers per device: the cluster view counts each device's recent straggler events.

A straggler event (backend/health/stragglers.py) names its rank's node and device in its
message; this reads them back from the job events of the newest WINDOW_HOURS.
"""

from __future__ import annotations

import re
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.db import utcnow
from backend.health.stragglers import KIND
from backend.jobs.models import JobEvent
from backend.nodes.schemas import DeviceStragglers

WINDOW_HOURS = 24
#: `Straggler.message`: "rank 1 on node n1 device 0 is a straggler: ..."
PLACE = re.compile(r"^rank \d+ on node (?P<node>\S+) device (?P<device>\d+) is a straggler")


def recent_stragglers(
    session: Session, *, hours: int = WINDOW_HOURS
) -> dict[tuple[str, int], DeviceStragglers]:
    """(node, device index) → straggler events there in the newest `hours`, and their jobs."""
    since = utcnow() - timedelta(hours=hours)
    rows = session.execute(
        select(JobEvent.job_id, JobEvent.message)
        .where(JobEvent.kind == KIND, JobEvent.time >= since)
        .order_by(JobEvent.time, JobEvent.id)
    )
    found: dict[tuple[str, int], DeviceStragglers] = {}
    for job_id, message in rows:
        if (match := PLACE.match(message)) is None:
            continue  # a rank whose device is unknown names no device
        key = (match["node"], int(match["device"]))
        seen = found.setdefault(key, DeviceStragglers(count=0, hours=hours, jobs=[]))
        seen.count += 1
        if job_id not in seen.jobs:
            seen.jobs.append(job_id)
    return found
