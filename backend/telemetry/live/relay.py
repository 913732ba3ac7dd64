"""Relays job and node change announcements from Redis into this process's hub."""

from __future__ import annotations

import json
import logging
import threading

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


def relay_announcements(
    *, db: Database, client: redis.Redis, hub: Hub, stop: threading.Event, news: News | None = None
) -> None:
    """Turn announced job ids into fresh job views on topics `jobs` and `job:<id>`, and the
    nodes into a fresh cluster view on `cluster` when they change or a job's changes moved
    which devices are booked (a placed, ended or withdrawn attempt): the browser shows who
    holds each device from this view only, never from job states. Every job announcement
    is `news` to this process's idle loops."""

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
                channel = message["channel"].decode()
                if channel == jobs_channel:
                    if news is not None:
                        news.announce()
                    _send_jobs(db, hub, json.loads(message["data"]))
                if channel in (nodes_channel, jobs_channel):
                    now = _booking(db)
                    if channel == nodes_channel or now != booked:
                        _send_nodes(db, hub)
                    booked = now
        finally:
            pubsub.close()

    keep_running("relay", relay_until_stopped, stop, log=log)


def _send_jobs(db: Database, hub: Hub, ids: list[int]) -> None:
    with db.session() as session:
        jobs = [job for job in (session.get(Job, int(i)) for i in ids[:1000]) if job is not None]
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
