"""A straggler event reaches an open job page live, like a hang (#33 item 7).

The straggler loop stores its events itself (the ingest stores a hang's); a page follows the
job topic over the websocket and refetches the events when an `events` delta arrives. Before,
nothing was sent: the page showed the straggler only when the job's state next changed.
"""

from __future__ import annotations

import time

from sqlalchemy import select

from backend.jobs.models import Attempt, AttemptSlice, JobEvent
from tests.telemetry.helpers import LiveServer, add_attempt, insert_points, receive, subscribe


def test_a_straggler_event_reaches_a_websocket_client_of_the_job_while_it_runs(
    live_api: LiveServer,
) -> None:
    job_id, attempt_id = add_attempt(live_api.db)
    with live_api.db.session() as session:
        attempt = session.get(Attempt, attempt_id)
        assert attempt is not None
        attempt.devices = [3, 5]
        session.add(
            AttemptSlice(attempt_id=attempt_id, node_name="node-a", node_rank=0, devices=[3, 5])
        )
    with live_api.websocket() as ws:
        subscribe(ws, f"job:{job_id}")
        assert receive(ws)["type"] == "snapshot"
        # rank 1 takes 60 ms a step where rank 0 takes 10 ms
        insert_points(
            live_api.db,
            [
                {
                    "attempt_id": attempt_id,
                    "rank": rank,
                    "step": step,
                    "name": "step_time",
                    "value": seconds,
                    "time": 1_700_000_000.0 + step,
                }
                for rank, seconds in ((0, 0.010), (1, 0.060))
                for step in range(1, 21)
            ],
        )
        stored = time.monotonic()
        deadline = stored + 20.0  # the loop looks every 5 s
        events: list[dict[str, object]] = []
        while not events and time.monotonic() < deadline:
            message = receive(ws, timeout=max(0.1, deadline - time.monotonic()))
            if message["type"] == "delta":
                events = message["data"].get("events", [])
        waited = time.monotonic() - stored

    [event] = events
    assert event["kind"] == "straggler" and event["attempt_id"] == attempt_id
    assert str(event["message"]).startswith("rank 1 on node node-a device 5 is a straggler")
    assert waited < 12.0, waited
    # and the REST list the page refetches holds it already
    with live_api.db.session() as session:
        kinds = session.scalars(select(JobEvent.kind).where(JobEvent.job_id == job_id)).all()
    assert "straggler" in kinds
