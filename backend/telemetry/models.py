"""Telemetry rows: metric points, device samples and log lines, each with an idempotent key."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from backend.db import Base

BigId = BigInteger().with_variant(Integer(), "sqlite")


class MetricPoint(Base):
    __tablename__ = "metric_points"
    __table_args__ = (
        UniqueConstraint("attempt_id", "name", "rank", "step"),
        # the series cache asks for rows newer than the id it holds
        Index("ix_metric_points_attempt_id_name_id", "attempt_id", "name", "id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    attempt_id: Mapped[int] = mapped_column(ForeignKey("attempts.id", ondelete="CASCADE"))
    rank: Mapped[int]
    step: Mapped[int]
    name: Mapped[str] = mapped_column(String(128))
    value: Mapped[float] = mapped_column(Float)
    time: Mapped[float] = mapped_column(Float)


class DeviceSample(Base):
    __tablename__ = "device_samples"
    __table_args__ = (
        UniqueConstraint("node", "device", "time"),
        Index("ix_device_samples_time", "time"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    node: Mapped[str] = mapped_column(String(64))
    device: Mapped[int]
    kind: Mapped[str] = mapped_column(String(8))
    time: Mapped[float] = mapped_column(Float)
    util: Mapped[float | None] = mapped_column(Float)
    mem_used: Mapped[int | None] = mapped_column(BigInteger)
    mem_total: Mapped[int | None] = mapped_column(BigInteger)
    temperature: Mapped[float | None] = mapped_column(Float)
    power: Mapped[float | None] = mapped_column(Float)
    attempt_id: Mapped[int | None]
    rank: Mapped[int | None]


class LogLine(Base):
    __tablename__ = "log_lines"
    __table_args__ = (UniqueConstraint("attempt_id", "rank", "stream", "seq"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    attempt_id: Mapped[int] = mapped_column(ForeignKey("attempts.id", ondelete="CASCADE"))
    rank: Mapped[int]
    stream: Mapped[str] = mapped_column(String(8))
    seq: Mapped[int]
    line: Mapped[str] = mapped_column(Text)
    time: Mapped[float] = mapped_column(Float)


class DeviceRollup(Base):
    """Device samples older than the raw retention, summarised per device and minute."""

    __tablename__ = "device_rollups"
    __table_args__ = (
        UniqueConstraint("node", "device", "start"),
        Index("ix_device_rollups_start", "start"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    node: Mapped[str] = mapped_column(String(64))
    device: Mapped[int]
    kind: Mapped[str] = mapped_column(String(8))
    start: Mapped[float] = mapped_column(Float, comment="bucket start, unix seconds")
    seconds: Mapped[int] = mapped_column(comment="bucket width")
    samples: Mapped[int]
    util_min: Mapped[float | None] = mapped_column(Float)
    util_mean: Mapped[float | None] = mapped_column(Float)
    util_max: Mapped[float | None] = mapped_column(Float)
    mem_used_min: Mapped[float | None] = mapped_column(Float)
    mem_used_mean: Mapped[float | None] = mapped_column(Float)
    mem_used_max: Mapped[float | None] = mapped_column(Float)
    mem_total: Mapped[int | None] = mapped_column(BigInteger)
    temperature_max: Mapped[float | None] = mapped_column(Float)
    power_mean: Mapped[float | None] = mapped_column(Float)
    power_max: Mapped[float | None] = mapped_column(Float)


class CurveRollup(Base):
    """A finished job's per-step metric curve as min/max buckets, so long runs read back fast.

    One row per (job, metric, bucket width in steps). `data` holds six little-endian
    float64 columns of `buckets` values each: min step, min time, min value, max step,
    max time, max value (see backend/telemetry/rollups.py).
    """

    __tablename__ = "curve_rollups"
    __table_args__ = (UniqueConstraint("job_id", "name", "width"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    width: Mapped[int] = mapped_column(comment="steps per bucket")
    through_attempt_id: Mapped[int] = mapped_column(comment="newest attempt the curve covers")
    steps: Mapped[int] = mapped_column(comment="points of the full per-step curve")
    buckets: Mapped[int]
    first_step: Mapped[int]
    first_time: Mapped[float] = mapped_column(Float)
    first_value: Mapped[float] = mapped_column(Float)
    last_step: Mapped[int]
    last_time: Mapped[float] = mapped_column(Float)
    last_value: Mapped[float] = mapped_column(Float)
    data: Mapped[bytes] = mapped_column(LargeBinary)
