"""Who holds each device reaches an open cluster view live, from the server's booking.

The browser no longer derives bookings from job states (a restarting job has released its
devices but its state still read "active"): the relay sends a fresh cluster view whenever
an announced job change moved the booking, and not for a change that did not.
"""

from __future__ import annotations

import redis
from sqlalchemy import update

from backend.deployment_keys import attach
from backend.jobs.fencing import register
from backend.jobs.models import AttemptSlice
from backend.signals import announce_jobs
from tests.telemetry.helpers import LiveServer, add_attempt, receive, subscribe
from workers.contract.protocol import NodeDevice, NodeRegistration


def holders(message: dict[str, object]) -> dict[int, int | None]:
    (node,) = message["data"]["nodes"]  # type: ignore[index]
    return {d["index"]: d["job_id"] for d in node["devices"]}


def next_cluster_view(ws: object) -> dict[str, object]:
    while True:
        message = receive(ws, timeout=10)  # type: ignore[arg-type]
        if "nodes" in (message.get("data") or {}):
            return message


def test_a_placed_and_an_ended_attempt_move_the_cluster_views_holders(
    live_api: LiveServer, redis_url: str
) -> None:
    client = attach(redis.Redis.from_url(redis_url), live_api.keys())  # the server's names
    devices = [NodeDevice(index=i, kind="cpu", name=f"slot {i}") for i in (0, 1)]
    with live_api.db.session() as session:
        registration = NodeRegistration(name="node-a", hostname="h", address="a", devices=devices)
        register(session, client, registration=registration)
    job_id, attempt_id = add_attempt(live_api.db)
    with live_api.websocket() as ws:
        subscribe(ws, "cluster")
        assert holders(next_cluster_view(ws)) == {0: None, 1: None}  # the snapshot
        with live_api.db.session() as session:
            session.add(
                AttemptSlice(
                    attempt_id=attempt_id, node_name="node-a", node_rank=0, devices=[1],
                    state="running",
                )
            )  # fmt: skip
            session.commit()
        announce_jobs(client, [job_id])
        assert holders(next_cluster_view(ws)) == {0: None, 1: job_id}
        announce_jobs(client, [job_id])  # no booking moved: no new cluster view
        with live_api.db.session() as session:
            session.execute(
                update(AttemptSlice)
                .where(AttemptSlice.attempt_id == attempt_id)
                .values(state="withdrawn")
            )
            session.commit()
        announce_jobs(client, [job_id])
        assert holders(next_cluster_view(ws)) == {0: None, 1: None}  # the next one is this
