"""A webhook (where, which events, its signing secret) and each delivery to it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from backend.auth.models import User
from backend.db import Base, utcnow


class Webhook(Base):
    __tablename__ = "webhooks"

    id: Mapped[int] = mapped_column(primary_key=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    all_jobs: Mapped[bool] = mapped_column(
        default=False, comment="admin-wide: every user's jobs, not only the owner's"
    )
    url: Mapped[str] = mapped_column(String(2048))
    secret: Mapped[str] = mapped_column(String(128), comment="HMAC-SHA256 key of the signature")
    events: Mapped[list[Any]] = mapped_column(comment="event names it receives")
    format: Mapped[str] = mapped_column(
        String(8), default="json", server_default="json", comment="json or slack"
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    owner: Mapped[User] = relationship(lazy="joined")


class WebhookDelivery(Base):
    __tablename__ = "webhook_deliveries"

    id: Mapped[int] = mapped_column(primary_key=True)
    webhook_id: Mapped[int] = mapped_column(
        ForeignKey("webhooks.id", ondelete="CASCADE"), index=True
    )
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    event: Mapped[str] = mapped_column(String(32))
    payload: Mapped[dict[str, Any]]
    state: Mapped[str] = mapped_column(
        String(16), default="pending", index=True, comment="pending, delivered or failed"
    )
    tries: Mapped[int] = mapped_column(default=0)
    next_at: Mapped[datetime] = mapped_column(default=utcnow)
    response_status: Mapped[int | None]
    duration_ms: Mapped[int | None] = mapped_column(
        comment="from sending to the answer's status line; null when no status came"
    )
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    delivered_at: Mapped[datetime | None]


class WebhookCursor(Base):
    """The newest job event already turned into deliveries (one row)."""

    __tablename__ = "webhook_cursor"

    id: Mapped[int] = mapped_column(primary_key=True)
    last_event_id: Mapped[int]
