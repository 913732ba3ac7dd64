"""The cluster view: every node with its devices, which job (and rank) holds each device
now, and each device's recent straggler events (the cluster page, live and REST); under an
executor whose cluster manager owns the nodes (Slurm), the manager's own nodes beside them,
as the executor last read them (`publish_manager` / `manager_view`, through Redis, so any
API process serves what the scheduler's executor saw)."""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import Any

import redis
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.db import as_utc, fields_of, utcnow
from backend.deployment_keys import keys_of
from backend.jobs.attempt_states import LIVE_SLICE_VALUES
from backend.jobs.models import Attempt, AttemptSlice, JobEvent
from backend.nodes.models import NodeState
from backend.nodes.schemas import DeviceOut, DeviceStragglers, ExecutorOut, ManagerOut, NodeOut
from backend.nodes.service import NODE_FIELDS, all_nodes, disk_view, host_view

log = logging.getLogger(__name__)

#: the Redis key (under the deployment's names) of the cluster manager's node view
MANAGER_KEY = "tb:cluster:manager"
#: a view not refreshed for this long is gone (its executor stopped): seconds
MANAGER_TTL = 300
#: a manager view older than this (seconds) is stale: the scheduler's executor stopped reading it
MANAGER_STALE_SECONDS = 60
#: the job event kind of a straggler report (backend.health.stragglers writes them)
STRAGGLER_KIND = "straggler"
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
        .where(JobEvent.kind == STRAGGLER_KIND, JobEvent.time >= since)
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


def describe_nodes(session: Session, *, name: str | None = None) -> list[NodeOut]:
    """Nodes (or the one named) with their devices and which job holds each device."""
    holders: dict[tuple[str, int], tuple[int, int]] = {}
    live_slices = (
        select(AttemptSlice, Attempt.job_id)
        .join(Attempt, Attempt.id == AttemptSlice.attempt_id)
        .where(AttemptSlice.state.in_(LIVE_SLICE_VALUES))
    )
    if name is not None:
        live_slices = live_slices.where(AttemptSlice.node_name == name)
    live = session.execute(live_slices).all()
    for part, job_id in live:
        for local_rank, index in enumerate(part.devices):
            holders[(part.node_name, int(index))] = (
                job_id,
                part.node_rank * len(part.devices) + local_rank,
            )
    stragglers = recent_stragglers(session)
    return [
        NodeOut(
            state=NodeState(n.state),
            host=host_view(n),
            disk=disk_view(n),
            devices=[
                DeviceOut(
                    job_id=holders.get((n.name, d.index), (None, None))[0],
                    rank=holders.get((n.name, d.index), (None, None))[1],
                    stragglers=stragglers.get((n.name, d.index)),
                    memory_shared=d.kind == "cpu",
                    **fields_of(d, "index kind name uuid memory_total"),
                )
                for d in n.devices
            ],
            **fields_of(n, NODE_FIELDS),
        )
        for n in all_nodes(session, name=name)
    ]


def publish_manager(client: redis.Redis, view: ManagerOut) -> None:
    """Store the executor's view of its cluster manager's nodes for the API to serve."""
    try:
        client.set(keys_of(client).name(MANAGER_KEY), view.model_dump_json(), ex=MANAGER_TTL)
    except redis.RedisError as err:
        log.warning("the cluster manager's nodes not published: %s", err)


def manager_view(client: redis.Redis) -> ManagerOut | None:
    """The cluster manager's nodes as last published; None under the node pool."""
    try:
        raw: Any = client.get(keys_of(client).name(MANAGER_KEY))
    except redis.RedisError:
        return None
    if raw is None:
        return None
    try:
        return ManagerOut.model_validate_json(raw)
    except ValidationError:  # written by another version: shown again at the next write
        return None


def manager_warning(client: redis.Redis, *, executor: str) -> ExecutorOut:
    """Whether the executor's cluster manager answers, in words for the board (None: it does)."""
    if executor == "nodes":
        return ExecutorOut(executor=executor)
    view = manager_view(client)
    name = "Slurm" if executor == "slurm" else executor
    if view is None:
        unread = f"{name}'s state has not been read (is the scheduler running?)"
        return ExecutorOut(executor=executor, warning=unread)
    age = (utcnow() - as_utc(view.observed_at)).total_seconds()
    warning = view.unreachable
    if warning is None and age > MANAGER_STALE_SECONDS:
        warning = f"{name}'s state not read for {age:.0f} s (is the scheduler running?)"
    return ExecutorOut(executor=executor, warning=warning, observed_at=view.observed_at)
