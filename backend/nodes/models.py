"""Worker nodes and the devices they offer."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import BigInteger, Float, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from backend.db import Base, utcnow


class NodeState(StrEnum):
    """A worker node as the control plane sees it."""

    up = "up"
    lost = "lost"  # its heartbeat expired; its attempts were ended
    misconfigured = "misconfigured"  # it heartbeats but cannot receive work (see its reason)


class Node(Base):
    __tablename__ = "nodes"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    hostname: Mapped[str] = mapped_column(String(255))
    address: Mapped[str] = mapped_column(String(255))
    state: Mapped[str] = mapped_column(String(16), default="up")
    drained: Mapped[bool] = mapped_column(default=False)
    data_dir: Mapped[str | None] = mapped_column(
        String(4096),
        comment="the node's resolved data dir, as it registered; checkpoints lie under it",
    )
    instance: Mapped[str | None] = mapped_column(
        String(64), comment="the running worker process's own id (new at every worker start)"
    )
    incarnation: Mapped[int] = mapped_column(default=0, server_default="0")
    state_reason: Mapped[str | None] = mapped_column(
        String(512), comment="why the node is lost or misconfigured"
    )
    interface: Mapped[str | None] = mapped_column(
        String(64), comment="the network interface of the advertised address (ranks use it)"
    )
    storage: Mapped[str | None] = mapped_column(
        String(64), comment="run-root group: nodes with the same value see each other's files"
    )
    registered_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_heartbeat: Mapped[datetime] = mapped_column(default=utcnow)
    host_cpu_percent: Mapped[float | None] = mapped_column(
        Float, comment="machine CPU use at the last heartbeat, all cores"
    )
    host_cpus: Mapped[int | None]
    host_memory_used: Mapped[int | None] = mapped_column(BigInteger)
    host_memory_total: Mapped[int | None] = mapped_column(BigInteger)
    disk_free: Mapped[int | None] = mapped_column(
        BigInteger, comment="bytes free in the data dir at the last heartbeat"
    )
    disk_total: Mapped[int | None] = mapped_column(BigInteger)
    devices: Mapped[list[Device]] = relationship(
        back_populates="node", cascade="all, delete-orphan", order_by="Device.index"
    )


class Device(Base):
    __tablename__ = "devices"
    __table_args__ = (UniqueConstraint("node_id", "index"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    index: Mapped[int]
    kind: Mapped[str] = mapped_column(String(8))
    name: Mapped[str] = mapped_column(String(128))
    uuid: Mapped[str | None] = mapped_column(String(128))
    memory_total: Mapped[int | None] = mapped_column(BigInteger)
    node: Mapped[Node] = relationship(back_populates="devices")
