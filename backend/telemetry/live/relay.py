"""Relays job and node change announcements from Redis into this process's hub."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import redis
from sqlalchemy import select

from backend.background import POLL_SECONDS, News, keep_running, wake_channel
from backend.db import Database
from backend.deployment_keys import keys_of
from backend.jobs.attempt_states import LIVE_SLICE_VALUES
from backend.jobs.cluster import describe_nodes
from backend.jobs.models import Attempt, AttemptSlice, Job
from backend.jobs.views import describe_jobs
from backend.signals import JOB_UPDATES_CHANNEL, NODE_UPDATES_CHANNEL
from backend.telemetry.live.hub import Hub

log = logging.getLogger(__name__)

#: announcements taken together at most (the rest wait for the next round)
COALESCE_MAX = 1000
#: job views read from the database in one query
JOBS_PER_READ = 500


def relay_announcements(
    *,
    db: Database,
    client: redis.Redis,
    stop: threading.Event,
    hub: Hub | None = None,
    news: News | None = None,
) -> None:
    """Turn announced job ids into fresh job views on topics `jobs` and `job:<id>`, and the
    nodes into a fresh cluster view on `cluster` when they change or a job's changes moved
    which devices are booked (a placed, ended or withdrawn attempt): the browser shows who
    holds each device from this view only, never from job states. Every job announcement
    is `news` to this process's idle loops; without a hub (a process that serves no
    websockets: `trainboard ingest`) that is all it does."""

    def relay_until_stopped() -> None:
        booked: frozenset[tuple[str, int, int]] | None = None
        pubsub = client.pubsub(ignore_subscribe_messages=True)
        try:
            keys = keys_of(client)
            nodes_channel, jobs_channel = (
                keys.name(NODE_UPDATES_CHANNEL),
                keys.name(JOB_UPDATES_CHANNEL),
            )
            pubsub.subscribe(jobs_channel, nodes_channel, wake_channel(client))
            while not stop.is_set():
                message = pubsub.get_message(timeout=POLL_SECONDS)
                if message is None:
                    continue
                jobs, nodes_moved = _coalesced(pubsub, message, jobs_channel, nodes_channel)
                if jobs and news is not None:
                    news.announce()
                if hub is None:
                    continue
                if jobs:
                    _send_jobs(db, hub, jobs)
                if jobs or nodes_moved:
                    now = _booking(db)
                    if nodes_moved or now != booked:
                        _send_nodes(db, hub)
                    booked = now
        finally:
            pubsub.close()

    keep_running("relay", relay_until_stopped, stop, log=log)


def _coalesced(
    pubsub: Any, first: dict[str, Any], jobs_channel: str, nodes_channel: str
) -> tuple[list[int], bool]:
    """The announcements already waiting after `first`, taken together: the job ids (each
    once, in order) and whether any node changed. A burst (a cluster registering, nodes
    declared lost, a pass placing a thousand jobs) then costs one cluster view and one view
    per job, not one per announcement (#34: the relay's views of 300 nodes were 27% of the
    API's time)."""
    jobs: dict[int, None] = {}
    nodes_moved = False
    message: dict[str, Any] | None = first
    for _ in range(COALESCE_MAX):
        if message is None:
            break
        channel = message["channel"].decode()
        if channel == jobs_channel:
            jobs.update(dict.fromkeys(int(i) for i in json.loads(message["data"])))
        nodes_moved = nodes_moved or channel == nodes_channel
        message = pubsub.get_message(timeout=0)
    return list(jobs), nodes_moved


def _send_jobs(db: Database, hub: Hub, ids: list[int]) -> None:
    """Fresh views of the announced jobs (a deleted one is skipped), read a chunk at a time."""
    for start in range(0, len(ids), JOBS_PER_READ):
        chunk = ids[start : start + JOBS_PER_READ]
        with db.session() as session:
            found = {j.id: j for j in session.scalars(select(Job).where(Job.id.in_(chunk)))}
            jobs = [found[i] for i in chunk if i in found]
            views = [v.model_dump(mode="json") for v in describe_jobs(session, jobs)]
        for view in views:
            hub.publish("jobs", {"job": view})
            hub.publish(f"job:{view['id']}", {"job": view})


def _send_nodes(db: Database, hub: Hub) -> None:
    with db.session() as session:
        nodes = [n.model_dump(mode="json") for n in describe_nodes(session)]
    hub.publish("cluster", {"nodes": nodes})


def _booking(db: Database) -> frozenset[tuple[str, int, int]]:
    """(node, device, job) of every device a live slice holds: what the cluster view shows."""
    with db.session() as session:
        rows = session.execute(
            select(AttemptSlice.node_name, AttemptSlice.devices, Attempt.job_id)
            .join(Attempt, Attempt.id == AttemptSlice.attempt_id)
            .where(AttemptSlice.state.in_(LIVE_SLICE_VALUES))
        ).all()
    return frozenset((node, int(index), job) for node, devices, job in rows for index in devices)
