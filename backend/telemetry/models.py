"""Telemetry rows: metric points, device samples and log lines, each with an idempotent key."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Float,
    ForeignKey,
    Index,
    Integer,
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
