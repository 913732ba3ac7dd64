"""Who holds each device reaches an open cluster view live, from the server's booking.

The browser no longer derives bookings from job states (a restarting job has released its
devices but its state still read "active"): the relay sends a fresh cluster view whenever
an announced job change moved the booking, and not for a change that did not.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from sqlalchemy import update

from backend.deployment_keys import attach, keys_of
from backend.jobs.fencing import register
from backend.jobs.models import AttemptSlice
from backend.signals import JOB_UPDATES_CHANNEL, NODE_UPDATES_CHANNEL, announce_jobs
from backend.telemetry.live import relay
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


def until_quiet(ws: object, quiet: float = 2.0) -> list[dict[str, Any]]:
    """Every message's data until none came for `quiet` s."""
    found = []
    while True:
        try:
            message = receive(ws, timeout=quiet)  # type: ignore[arg-type]
        except TimeoutError:
            return found
        found.append(message.get("data") or {})


def test_a_burst_of_announcements_costs_one_view_and_loses_no_job(
    live_api: LiveServer, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(relay, "JOBS_PER_READ", 2)  # the jobs' views read in several chunks
    client = attach(redis.Redis.from_url(redis_url), live_api.keys())
    devices = [NodeDevice(index=0, kind="cpu", name="slot 0")]
    with live_api.db.session() as session:
        registration = NodeRegistration(name="node-a", hostname="h", address="a", devices=devices)
        register(session, client, registration=registration)
    jobs = [add_attempt(live_api.db)[0] for _ in range(5)]
    nodes_channel = keys_of(client).name(NODE_UPDATES_CHANNEL)
    jobs_channel = keys_of(client).name(JOB_UPDATES_CHANNEL)
    with live_api.websocket() as ws:
        subscribe(ws, "cluster")
        subscribe(ws, "jobs")
        next_cluster_view(ws)  # the snapshot
        until_quiet(ws, quiet=1.0)
        burst = client.pipeline(transaction=False)
        for job_id in jobs * 10:  # 50 node and 50 job announcements, sent at once
            burst.publish(nodes_channel, "1")
            burst.publish(jobs_channel, json.dumps([job_id]))
        burst.execute()
        messages = until_quiet(ws)
    cluster_views = [m for m in messages if "nodes" in m]
    assert {m["job"]["id"] for m in messages if "job" in m} == set(jobs)  # across chunks
    assert 1 <= len(cluster_views) < 10  # taken together, not one view per announcement
