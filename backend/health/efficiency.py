"""Efficiency of a job: device-hours, throughput per device, and MFU for template jobs.

Device-seconds come from the usage accounting (backend/usage/accounting.attempt_usage, one
place). Throughput is the median of the newest `samples_per_s` (and `tokens_per_s`) points
rank 0 sent (the engine's are global rates: global batch over step time); per device it is
divided by the job's devices. MFU is the PaLM/nanoGPT model-FLOPs utilization: the
template's training FLOPs per sample (workers/contract/flops.py) times samples/s per device,
over the device's peak for the job's precision (backend/health/peaks.py); none on CPU slots
or on a GPU the table does not know.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.db import as_utc
from backend.health.peaks import peak_flops
from backend.jobs.models import Attempt, AttemptSlice, Job
from backend.nodes.models import Device, Node
from backend.telemetry.models import MetricPoint
from backend.usage.accounting import AttemptUsage, attempt_usage
from workers.contract.flops import flops_per_sample

#: newest points whose median is the job's throughput
RATE_POINTS = 200


@dataclass(frozen=True)
class Efficiency:
    device_hours: float
    busy_device_hours: float | None
    run_seconds: float
    devices: int
    samples_per_s_per_device: float | None
    tokens_per_s_per_device: float | None
    flops_per_sample: float | None
    mfu: float | None
    mfu_note: str
    device_names: list[str]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _median_rate(session: Session, attempt_ids: list[int], name: str) -> float | None:
    values = session.scalars(
        select(MetricPoint.value)
        .where(
            MetricPoint.attempt_id.in_(attempt_ids),
            MetricPoint.name == name,
            MetricPoint.rank == 0,
        )
        .order_by(MetricPoint.time.desc())
        .limit(RATE_POINTS)
    ).all()
    return float(statistics.median(values)) if values else None


def _devices(session: Session, attempt_id: int) -> list[tuple[str, str]]:
    """(kind, name) of each device of an attempt's slices."""
    found = []
    for node_name, indexes in session.execute(
        select(AttemptSlice.node_name, AttemptSlice.devices).where(
            AttemptSlice.attempt_id == attempt_id
        )
    ):
        rows = session.execute(
            select(Device.index, Device.kind, Device.name)
            .join(Node, Node.id == Device.node_id)
            .where(Node.name == node_name)
        ).all()
        by_index = {int(i): (kind, name) for i, kind, name in rows}
        found += [by_index.get(int(i), ("unknown", f"{node_name} device {i}")) for i in indexes]
    return found


def _mfu(
    job: Job, rate: float | None, devices: list[tuple[str, str]]
) -> tuple[float | None, float | None, str]:
    """(flops per sample, MFU, why none) for the job's newest devices."""
    spec = job.spec_model
    if spec.template is None:
        return None, None, "none: a script job's model FLOPs are unknown"
    try:  # the validated spec holds every hyperparameter of its template
        flops = flops_per_sample(spec.template, spec.hyperparameters)
    except (KeyError, ValueError) as err:
        return None, None, f"none: the spec's hyperparameters do not give the model ({err})"
    if not devices:
        return flops, None, "none: the job has not run yet"
    if any(kind == "cpu" for kind, _ in devices):
        return flops, None, "none: CPU slots have no peak FLOPS to compare with"
    precision = spec.precision.value
    peaks = [peak_flops(name, kind, precision) for kind, name in devices]
    if any(p is None for p in peaks):
        unknown = sorted({name for (_, name), p in zip(devices, peaks, strict=True) if p is None})
        return flops, None, f"none: no peak FLOPS known for {', '.join(unknown)}"
    if rate is None:
        return flops, None, "none: no samples_per_s reported yet"
    achieved = flops * rate  # the whole gang's FLOP/s
    return flops, achieved / sum(p for p in peaks if p is not None), f"{precision} peak"


def job_efficiency(session: Session, job: Job, *, now: datetime | None = None) -> Efficiency:
    """A job's efficiency over all its attempts so far (a running one counted up to now)."""
    usages = attempt_usage(session, job_ids=[job.id], now=now)
    attempts = list(
        session.scalars(select(Attempt.id).where(Attempt.job_id == job.id).order_by(Attempt.number))
    )
    ran = [u for u in usages if u.start is not None]
    newest = ran[-1] if ran else None
    devices = _devices(session, newest.attempt_id) if newest else []
    count = len(devices) or job.devices_requested
    rate = _median_rate(session, attempts, "samples_per_s") if attempts else None
    tokens = _median_rate(session, attempts, "tokens_per_s") if attempts else None
    flops, mfu, note = _mfu(job, rate, devices)
    busy = [u.busy for u in ran if u.busy is not None]
    return Efficiency(
        device_hours=sum(u.allocated for u in ran) / 3600,
        busy_device_hours=sum(busy) / 3600 if ran and len(busy) == len(ran) else None,
        run_seconds=sum(u.allocated / max(1, u.devices) for u in ran),
        devices=count,
        samples_per_s_per_device=rate / count if rate is not None else None,
        tokens_per_s_per_device=tokens / count if tokens is not None else None,
        flops_per_sample=flops,
        mfu=mfu,
        mfu_note=note,
        device_names=sorted({name for _, name in devices}),
    )


def device_hours_at(usages: list[AttemptUsage], times: list[float]) -> list[float]:
    """Device-hours a job had used by each unix time: its attempts' devices x time run."""
    spans = [
        (as_utc(u.start).timestamp(), as_utc(u.end).timestamp() if u.end else None, u.devices)
        for u in usages
        if u.start is not None
    ]
    out = []
    for t in times:
        used = sum(
            devices * max(0.0, min(t, end if end is not None else t) - start)
            for start, end, devices in spans
        )
        out.append(used / 3600)
    return out
