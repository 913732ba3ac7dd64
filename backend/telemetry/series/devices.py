"""A job's devices over its whole life: each attempt's samples on its own devices and span."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from backend.db import as_utc, utcnow
from backend.jobs.models import AttemptSlice
from backend.telemetry.models import DeviceSample
from backend.telemetry.series.queries import attempts_of

#: the columns of a device's samples, as DeviceColumns names them
COLUMNS = ("time", "util", "mem_used", "temperature", "power")


def _unix(moment: datetime | None) -> float | None:
    return None if moment is None else as_utc(moment).timestamp()


def job_devices(session: Session, *, job_id: int, points: int) -> list[dict[str, Any]]:
    """Per attempt, oldest first: its span and each of its devices' samples within it.

    An attempt's devices are its slices' (every node of the gang); its span is from its claim
    to its end (now while it holds them), so a slot's load from another job before or after
    is left out. Each device keeps at most `points` samples, evenly spaced (0: all).
    """
    attempts = attempts_of(session, job_id)
    slices: dict[int, list[AttemptSlice]] = {}
    for part in session.scalars(
        select(AttemptSlice)
        .where(AttemptSlice.attempt_id.in_([a.id for a in attempts]))
        .order_by(AttemptSlice.node_rank)
    ):
        slices.setdefault(part.attempt_id, []).append(part)
    now = utcnow().timestamp()
    found = []
    for attempt in attempts:
        start = _unix(attempt.claimed_at)
        end = _unix(attempt.finished_at)
        parts = [(p.node_name, list(p.devices)) for p in slices.get(attempt.id, [])]
        if not parts and attempt.node_name:
            parts = [(attempt.node_name, list(attempt.devices))]
        devices = [] if start is None else _samples(session, parts, start, end or now, points)
        found.append(
            {
                "attempt_id": attempt.id,
                "number": attempt.number,
                "start": start,
                "end": end,
                "devices": devices,
            }
        )
    return found


def _samples(
    session: Session, parts: list[tuple[str, list[int]]], start: float, end: float, points: int
) -> list[dict[str, Any]]:
    if not parts:
        return []
    on_devices = or_(
        *(
            and_(DeviceSample.node == node, DeviceSample.device.in_(devices))
            for node, devices in parts
        )
    )
    query = (
        select(DeviceSample)
        .where(on_devices, DeviceSample.time >= start, DeviceSample.time <= end)
        .order_by(DeviceSample.time)
    )
    rows: dict[tuple[str, int], list[DeviceSample]] = {
        (node, device): [] for node, devices in parts for device in devices
    }
    for sample in session.scalars(query):
        rows.setdefault((sample.node, sample.device), []).append(sample)
    out = []
    for (node, device), held in rows.items():
        if points and len(held) > points:
            held = [held[i] for i in np.linspace(0, len(held) - 1, points).round().astype(int)]
        out.append(
            {
                "node": node,
                "device": device,
                "kind": held[-1].kind if held else None,
                **{name: [getattr(s, name) for s in held] for name in COLUMNS},
            }
        )
    return out
