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
    text,
    true,
)
from sqlalchemy.orm import Mapped, mapped_column

from backend.db import Base

BigId = BigInteger().with_variant(Integer(), "sqlite")


class MetricPoint(Base):
    """One metric value of one rank at one step; (attempt, name, step, rank) is its identity.

    The key's columns are in the order points arrive (step before rank), so inserts append
    to the end of each series' index range. There is no foreign key to attempts: its
    per-row check was the largest cost of the ingest; the writer share-locks each attempt
    it writes points for, once per transaction, instead. Nothing deletes attempts; code
    that does must delete their points too.

    `mark` is how the series cache finds what changed (backend/telemetry/series/cache.py): a row
    is marked unless the ingest's bulk path (PostgreSQL's COPY, SQLite's INSERT OR IGNORE that
    skipped no row) left it unmarked, which it does to every row of a series in one
    transaction but the one with the lowest step. So every transaction that
    adds rows to a series adds a marked row at or below their steps, and the marked rows
    (indexed by id) say which series changed since an id and from which step.

    On PostgreSQL `id` has no primary key index (migration 0028): the key above makes a point
    unique, and a second unique index on every row cost the ingest a large part of its
    server CPU a point. The ids come from `metric_points_id_seq` (in blocks: the ingest's
    COPY), unique by construction; the ORM maps `id` as the primary key. SQLite keeps its
    INTEGER PRIMARY KEY, which is its rowid, not an extra index.
    """

    __tablename__ = "metric_points"
    __table_args__ = (
        UniqueConstraint("attempt_id", "name", "step", "rank"),
        Index(
            "ix_metric_points_marks",
            "attempt_id",
            "name",
            "id",
            postgresql_where=text("mark"),
            sqlite_where=text("mark"),
        ),
        # the summaries' "marked rows since an id" (backend/telemetry/series/summaries.py)
        Index(
            "ix_metric_points_mark_ids",
            "id",
            postgresql_where=text("mark"),
            sqlite_where=text("mark"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    attempt_id: Mapped[int]
    rank: Mapped[int]
    step: Mapped[int]
    name: Mapped[str] = mapped_column(String(128))
    value: Mapped[float] = mapped_column(Float)
    time: Mapped[float] = mapped_column(Float)
    mark: Mapped[bool] = mapped_column(server_default=true())


class _OneDevice:
    """The columns naming one device of one node: device samples and their rollups."""

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    node: Mapped[str] = mapped_column(String(64))
    device: Mapped[int]
    kind: Mapped[str] = mapped_column(String(8))


class DeviceSample(_OneDevice, Base):
    __tablename__ = "device_samples"
    __table_args__ = (
        UniqueConstraint("node", "device", "time"),
        Index("ix_device_samples_time", "time"),
    )

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
    __table_args__ = (
        UniqueConstraint("attempt_id", "rank", "stream", "seq"),
        # the per-attempt cap finds an attempt's oldest lines (ids increase as lines arrive)
        Index("ix_log_lines_attempt_id_id", "attempt_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    attempt_id: Mapped[int] = mapped_column(ForeignKey("attempts.id", ondelete="CASCADE"))
    rank: Mapped[int]
    stream: Mapped[str] = mapped_column(String(8))
    seq: Mapped[int]
    line: Mapped[str] = mapped_column(Text)
    time: Mapped[float] = mapped_column(Float)


class DeviceRollup(_OneDevice, Base):
    """Device samples older than the raw retention, summarised per device and minute."""

    __tablename__ = "device_rollups"
    __table_args__ = (
        UniqueConstraint("node", "device", "start"),
        Index("ix_device_rollups_start", "start"),
    )

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


class CurveSeal(Base):
    """How far a job's metric curve is sealed into curve_blocks, and as of which mark.

    Steps below `sealed_through` are in the blocks, as the rows up to the marked id
    `watermark` made them (backend/telemetry/series/rollups.py). A marked row above the watermark
    at a step below `sealed_through` means the blocks from that step on are stale.
    """

    __tablename__ = "curve_seals"
    __table_args__ = (UniqueConstraint("job_id", "name"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    sealed_through: Mapped[int] = mapped_column(comment="steps below this are in curve_blocks")
    watermark: Mapped[int] = mapped_column(BigInteger, comment="newest marked point id covered")


class CurveBlock(Base):
    """One aligned step range of a job's per-step metric curve as min/max buckets of a width.

    One row per (job, metric, bucket width, block start). `data` holds six little-endian
    float64 columns of `buckets` values each: min step, min time, min value, max step,
    max time, max value; `buckets` 0 means the range holds a non-finite value (read raw).
    """

    __tablename__ = "curve_blocks"
    __table_args__ = (UniqueConstraint("job_id", "name", "width", "start_step"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    width: Mapped[int] = mapped_column(comment="steps per bucket")
    start_step: Mapped[int]
    end_step: Mapped[int] = mapped_column(comment="exclusive; steps up to it are in the block")
    buckets: Mapped[int]
    first_step: Mapped[int]
    first_time: Mapped[float] = mapped_column(Float)
    first_value: Mapped[float] = mapped_column(Float)
    last_step: Mapped[int]
    last_time: Mapped[float] = mapped_column(Float)
    last_value: Mapped[float] = mapped_column(Float)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class MetricSummary(Base):
    """A job's metric summarised over every step (compare's summary), for the run table.

    Written by backend/telemetry/series/summaries.py whenever the metric's newest marked
    point moves past `watermark`; read by the run table without touching any curve.
    """

    __tablename__ = "metric_summaries"
    __table_args__ = (
        UniqueConstraint("job_id", "name"),
        Index("ix_metric_summaries_name_final", "name", "final"),
        Index("ix_metric_summaries_name_best", "name", "best"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    final: Mapped[float | None] = mapped_column(Float)
    final_step: Mapped[int | None]
    best: Mapped[float | None] = mapped_column(Float)
    best_step: Mapped[int | None]
    min: Mapped[float | None] = mapped_column(Float)
    max: Mapped[float | None] = mapped_column(Float)
    direction: Mapped[str | None] = mapped_column(
        String(8), comment="min or max: which end is best; null: neither (grad_norm, lr)"
    )
    watermark: Mapped[int] = mapped_column(
        BigInteger, comment="newest marked point id the summary covers"
    )
