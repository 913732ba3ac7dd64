"""Per-user scheduling limits set by an admin: fair-share weight and quotas."""

from __future__ import annotations

from sqlalchemy import Float, ForeignKey
from sqlalchemy.orm import Mapped, mapped_column

from backend.db import Base


class UserLimits(Base):
    """A user's share and quotas; a user without a row has share 1 and no quota."""

    __tablename__ = "user_limits"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    share: Mapped[float] = mapped_column(Float, default=1.0, comment="fair-share weight")
    max_devices: Mapped[int | None] = mapped_column(comment="devices in use at once")
    max_device_hours: Mapped[float | None] = mapped_column(
        Float, comment="device-hours allocated per rolling 7 days"
    )
