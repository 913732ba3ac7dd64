"""Retention of device samples: raw rows past the window become per-bucket min/mean/max rollups."""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from backend.background import every
from backend.db import Database
from backend.telemetry.ingest.store import insert_ignoring_duplicates
from backend.telemetry.models import DeviceRollup, DeviceSample

log = logging.getLogger(__name__)

#: seconds of raw samples rolled up per transaction
CHUNK_SECONDS = 3600
RUN_EVERY_SECONDS = 300.0


def roll_up(session: Session, *, before: float, bucket: int = 60) -> int:
    """Roll up whole buckets of raw samples older than `before` (one chunk); rows rolled up."""
    cutoff = (before // bucket) * bucket
    oldest = session.scalar(select(func.min(DeviceSample.time)).where(DeviceSample.time < cutoff))
    if oldest is None:
        return 0
    end = min(cutoff, (oldest // bucket) * bucket + CHUNK_SECONDS)
    window = (DeviceSample.time >= oldest, DeviceSample.time < end)
    samples = session.scalars(select(DeviceSample).where(*window)).all()
    groups: dict[tuple[str, int, float], list[DeviceSample]] = defaultdict(list)
    for sample in samples:
        groups[(sample.node, sample.device, (sample.time // bucket) * bucket)].append(sample)
    rollups = [_summarise(key, rows, bucket) for key, rows in groups.items()]
    insert_ignoring_duplicates(session, DeviceRollup, rollups)
    session.execute(delete(DeviceSample).where(*window))
    return len(samples)


def _summarise(
    key: tuple[str, int, float], rows: list[DeviceSample], bucket: int
) -> dict[str, Any]:
    node, device, start = key

    def stats(values: list[float | int | None]) -> tuple[float | None, ...]:
        present = [float(v) for v in values if v is not None]
        if not present:
            return None, None, None
        return min(present), sum(present) / len(present), max(present)

    util = stats([r.util for r in rows])
    mem = stats([r.mem_used for r in rows])
    power = stats([r.power for r in rows])
    temperatures = [r.temperature for r in rows if r.temperature is not None]
    totals = [r.mem_total for r in rows if r.mem_total is not None]
    return {
        "node": node,
        "device": device,
        "kind": rows[0].kind,
        "start": start,
        "seconds": bucket,
        "samples": len(rows),
        "util_min": util[0],
        "util_mean": util[1],
        "util_max": util[2],
        "mem_used_min": mem[0],
        "mem_used_mean": mem[1],
        "mem_used_max": mem[2],
        "mem_total": max(totals) if totals else None,
        "temperature_max": max(temperatures) if temperatures else None,
        "power_mean": power[1],
        "power_max": power[2],
    }


def run_retention(
    *, db: Database, retention_hours: float, bucket: int, stop: threading.Event
) -> None:
    """Every few minutes, roll up everything past the raw window (chunk by chunk)."""

    def roll_up_all() -> None:
        before = time.time() - retention_hours * 3600
        while not stop.is_set():
            with db.session() as session:
                if roll_up(session, before=before, bucket=bucket) == 0:
                    break

    every(RUN_EVERY_SECONDS, "device sample retention", roll_up_all, stop, log=log, wait_first=True)
