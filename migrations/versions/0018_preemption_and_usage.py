"""preemption, fair share, quotas and attempt accounting

Create Date: 2026-11-25 12:55:00

`jobs.preempted_at/preempted_by` (the last preemption: no victim again within the
minimum run time), `jobs.queue_position`, per-attempt accounting (`owner_id`, `device_count`,
`allocated_device_seconds`, `busy_device_seconds`) and `user_limits` (an admin's
fair-share weight and quotas per user).
"""

import sqlalchemy as sa
from alembic import op

from migrations.helpers import add_columns, column, create_index, drop_columns, drop_index
from migrations.helpers import foreign_key, primary_key, required

revision: str = "0018"
down_revision: str | None = "0017"


def upgrade() -> None:
    add_columns(
        "jobs",
        column(
            "preempted_at",
            sa.DateTime(timezone=True),
            "when a higher-priority job last took its devices",
        ),
        column("preempted_by", sa.Integer(), "the job that preempted it last"),
        column(
            "queue_position",
            sa.Integer(),
            "1 = next to be placed, in the scheduler's last pass (queued jobs only)",
        ),
    )
    add_columns(
        "attempts",
        column("owner_id", sa.Integer(), "the job's owner, for usage"),
        column("device_count", sa.Integer(), "devices over all its slices"),
        column(
            "allocated_device_seconds",
            sa.Float(),
            "devices x seconds from claim to end; set when the attempt has ended",
        ),
        column(
            "busy_device_seconds",
            sa.Float(),
            "allocated, weighted by each device's sampled utilization",
        ),
    )
    create_index("attempts", "owner_id")
    op.create_table(
        "user_limits",
        required("user_id", sa.Integer()),
        required("share", sa.Float(), "fair-share weight"),
        column("max_devices", sa.Integer(), "devices in use at once"),
        column("max_device_hours", sa.Float(), "device-hours allocated per rolling 7 days"),
        foreign_key("user_limits", "user_id", "users"),
        primary_key("user_limits", "user_id"),
    )


def downgrade() -> None:
    op.drop_table("user_limits")
    drop_index("attempts", "owner_id")
    drop_columns(
        "attempts",
        "busy_device_seconds",
        "allocated_device_seconds",
        "device_count",
        "owner_id",
    )
    drop_columns("jobs", "queue_position", "preempted_by", "preempted_at")
