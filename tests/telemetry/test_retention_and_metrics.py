"""Old device samples become minute rollups; /metrics speaks Prometheus to scrapers only."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from backend.config import Settings
from backend.db import Database
from backend.jobs.fencing import register
from backend.telemetry.models import DeviceRollup, DeviceSample
from backend.telemetry.series.retention import roll_up
from tests.telemetry.helpers import ADMIN, add_attempt
from workers.contract.protocol import NodeDevice, NodeRegistration

GIB = 1024**3
SCRAPE_TOKEN = "tb_scrape-token-0123456789"


def gpu_sample(t: float, util: float, device: int = 0) -> dict[str, object]:
    return {"node": "gpu-a", "device": device, "kind": "gpu", "time": t, "util": util,
            "mem_used": 12 * GIB, "mem_total": 80 * GIB, "temperature": 60.0 + util / 10,
            "power": 300.0}  # fmt: skip


def test_old_samples_become_minute_rollups_and_recent_ones_stay_raw(database: Database) -> None:
    now = 1_700_000_000.0 - 1_700_000_000.0 % 60
    rows = [gpu_sample(now - 180 + i, util=float(i % 60)) for i in range(180)]  # three minutes
    with database.session() as session:
        session.execute(DeviceSample.__table__.insert(), rows)
    with database.session() as session:
        assert roll_up(session, before=now - 60, bucket=60) == 120
        assert roll_up(session, before=now - 60, bucket=60) == 0  # nothing left to do
    with database.session() as session:
        rollups = session.scalars(select(DeviceRollup).order_by(DeviceRollup.start)).all()
        raw = session.scalar(select(func.count()).select_from(DeviceSample))
    assert raw == 60
    assert [(r.start, r.samples) for r in rollups] == [(now - 180, 60), (now - 120, 60)]
    assert (rollups[0].util_min, rollups[0].util_mean, rollups[0].util_max) == (0.0, 29.5, 59.0)
    assert rollups[0].temperature_max == pytest.approx(65.9)
    assert rollups[0].mem_used_mean == 12 * GIB


@pytest.fixture
def scraped(
    api: tuple[TestClient, Database], settings: Settings
) -> Iterator[tuple[TestClient, Database]]:
    client, db = api
    client.app.state.settings = settings.model_copy(update={"metrics_token": SCRAPE_TOKEN})
    with db.session() as session:
        devices = [NodeDevice(index=0, kind="gpu", name="NVIDIA H100", uuid="GPU-abc")]
        registration = NodeRegistration(name="gpu-a", hostname="h", address="a", devices=devices)
        register(session, client.app.state.redis, registration=registration)  # type: ignore[attr-defined]
        session.execute(DeviceSample.__table__.insert(), [gpu_sample(time.time(), util=87.0)])
    add_attempt(db, state="queued")
    add_attempt(db, state="queued")
    add_attempt(db, state="running")
    yield client, db


def test_metrics_use_dcgm_names_and_count_jobs_without_naming_them(
    scraped: tuple[TestClient, Database],
) -> None:
    client, _ = scraped
    body = client.get("/metrics", headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"}).text
    labels = 'Hostname="gpu-a",UUID="GPU-abc",gpu="0",modelName="NVIDIA H100"'
    assert f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} 87.0" in body
    assert f"DCGM_FI_DEV_FB_USED{{{labels}}} 12288.0" in body
    assert f"DCGM_FI_DEV_FB_FREE{{{labels}}} 69632.0" in body
    assert 'trainboard_jobs{state="queued"} 2.0' in body
    assert "trainboard_queue_length 2.0" in body
    assert 'trainboard_ingest_lag_seconds{stream="tb:metrics"}' in body
    assert "telemetry-test" not in body and "alice" not in body  # no job names, no owners
    assert client.get("/metrics", headers=ADMIN).status_code == 200


def test_metrics_refuse_anonymous_and_non_admin_callers(
    scraped: tuple[TestClient, Database],
) -> None:
    client, _ = scraped
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
