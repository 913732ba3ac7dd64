"""`GET /metrics` in Prometheus text format: DCGM-named GPU gauges, jobs by state, ingest lag.

It answers a bearer `TRAINBOARD_METRICS_TOKEN` (for a scraper) or an admin, never an
anonymous caller. Labels carry node names, device indexes, UUIDs and model names,
never job names or owners.
"""

from __future__ import annotations

import hmac
import time
from typing import Annotated

import redis
from fastapi import APIRouter, Depends, HTTPException, Request, Response, status
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge, generate_latest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from backend.auth.deps import SessionDep, credentials_from
from backend.auth.service import authenticate
from backend.deployment_keys import keys_of
from backend.jobs.models import Job
from backend.nodes.models import Device, Node
from backend.telemetry.ingest.streams import backlog
from backend.telemetry.models import DeviceSample
from workers.contract.protocol import ALL_STREAMS

router = APIRouter(tags=["metrics"])
MIB = 1024 * 1024
#: samples older than this are not reported as current
FRESH_SECONDS = 60.0
DCGM_LABELS = ["gpu", "UUID", "modelName", "Hostname"]
CPU_LABELS = ["slot", "Hostname"]


def require_scraper(request: Request, session: SessionDep) -> None:
    """The metrics token, or an admin principal; 401 otherwise."""
    secret, _ = credentials_from(request.headers, request.cookies)
    expected = request.app.state.settings.metrics_token
    if secret and expected and hmac.compare_digest(secret.encode(), expected.encode()):
        return
    principal = authenticate(session, secret) if secret else None
    if principal is None or not principal.is_admin:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "metrics need the metrics token or an admin",
            headers={"WWW-Authenticate": "Bearer"},
        )


@router.get("/metrics", response_class=Response, include_in_schema=False)
def metrics(
    request: Request, session: SessionDep, _: Annotated[None, Depends(require_scraper)]
) -> Response:
    """Everything a Grafana dashboard for Trainboard needs, read now."""
    registry = CollectorRegistry()
    _device_gauges(registry, session)
    _job_gauges(registry, session)
    _ingest_gauges(registry, request.app.state.redis)
    _disk_gauges(registry, session, request.app.state.write_health.probe(request.app.state.db))
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


def _device_gauges(registry: CollectorRegistry, session: Session) -> None:
    def gauge(name: str, doc: str, labels: list[str] = DCGM_LABELS) -> Gauge:
        return Gauge(name, doc, labels, registry=registry)

    util = gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).")
    used = gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).")
    free = gauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).")
    temp = gauge("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).")
    power = gauge("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).")
    cpu = gauge("trainboard_cpu_slot_util_percent", "CPU % of the rank on a CPU slot.", CPU_LABELS)
    rss = gauge("trainboard_cpu_slot_rss_bytes", "RSS of the rank on a CPU slot.", CPU_LABELS)
    newest = (
        select(DeviceSample.node, DeviceSample.device, func.max(DeviceSample.time).label("t"))
        .where(DeviceSample.time >= time.time() - FRESH_SECONDS)
        .group_by(DeviceSample.node, DeviceSample.device)
        .subquery()
    )
    query = (
        select(DeviceSample, Device.uuid, Device.name)
        .join(
            newest,
            (DeviceSample.node == newest.c.node)
            & (DeviceSample.device == newest.c.device)
            & (DeviceSample.time == newest.c.t),
        )  # fmt: skip
        .outerjoin(Node, Node.name == DeviceSample.node)
        .outerjoin(Device, (Device.node_id == Node.id) & (Device.index == DeviceSample.device))
    )
    for sample, uuid, model in session.execute(query):
        if sample.kind == "cpu":
            labels = [str(sample.device), sample.node]
            _set(cpu, labels, sample.util)
            _set(rss, labels, sample.mem_used)
            continue
        labels = [str(sample.device), uuid or "", model or "", sample.node]
        _set(util, labels, sample.util)
        _set(used, labels, sample.mem_used / MIB if sample.mem_used is not None else None)
        if sample.mem_used is not None and sample.mem_total is not None:
            _set(free, labels, (sample.mem_total - sample.mem_used) / MIB)
        _set(temp, labels, sample.temperature)
        _set(power, labels, sample.power)


def _job_gauges(registry: CollectorRegistry, session: Session) -> None:
    jobs = Gauge("trainboard_jobs", "Jobs by state.", ["state"], registry=registry)
    queue = Gauge("trainboard_queue_length", "Jobs waiting to be scheduled.", registry=registry)
    counts = dict(session.execute(select(Job.state, func.count()).group_by(Job.state)).all())
    for state, count in counts.items():
        jobs.labels(state).set(count)
    queue.set(counts.get("queued", 0))


def _ingest_gauges(registry: CollectorRegistry, client: redis.Redis) -> None:
    labels = ["stream"]
    pending = Gauge("trainboard_ingest_pending_entries", "Entries read, not yet committed.",
                    labels, registry=registry)  # fmt: skip
    waiting = Gauge("trainboard_ingest_undelivered_entries", "Entries no consumer has read.",
                    labels, registry=registry)  # fmt: skip
    lag = Gauge("trainboard_ingest_lag_seconds", "Age of the oldest unacknowledged entry.",
                labels, registry=registry)  # fmt: skip
    for stream in ALL_STREAMS:  # labelled by kind; read from this deployment's stream
        found = backlog(client, keys_of(client).stream(stream))
        pending.labels(stream).set(found.pending)
        waiting.labels(stream).set(found.undelivered)
        lag.labels(stream).set(found.oldest_seconds)


def _disk_gauges(registry: CollectorRegistry, session: Session, unwritable: str | None) -> None:
    writable = Gauge("trainboard_database_writable",
                     "1 while the database takes writes, 0 while it refuses them (disk full).",
                     registry=registry)  # fmt: skip
    writable.set(0 if unwritable else 1)
    free = Gauge("trainboard_node_disk_free_bytes", "Free bytes in a node's data dir.",
                 ["Hostname"], registry=registry)  # fmt: skip
    for name, value in session.execute(select(Node.name, Node.disk_free)).all():
        _set(free, [name], value)


def _set(gauge: Gauge, labels: list[str], value: float | int | None) -> None:
    if value is not None:
        gauge.labels(*labels).set(value)
