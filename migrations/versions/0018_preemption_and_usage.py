"""preemption, fair share, quotas and attempt accounting

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-25 12:55:00

`jobs.preempted_at/preempted_by` (the last preemption: no victim again within the
minimum run time), `jobs.queue_position`, per-attempt accounting (`owner_id`, `device_count`,
`allocated_device_seconds`, `busy_device_seconds`) and `user_limits` (an admin's
fair-share weight and quotas per user).
"""

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "preempted_at",
                sa.DateTime(timezone=True),
                nullable=True,
                comment="when a higher-priority job last took its devices",
            )
        )
        batch_op.add_column(
            sa.Column(
                "preempted_by",
                sa.Integer(),
                nullable=True,
                comment="the job that preempted it last",
            )
        )
        batch_op.add_column(
            sa.Column(
                "queue_position",
                sa.Integer(),
                nullable=True,
                comment="1 = next to be placed, in the scheduler's last pass (queued jobs only)",
            )
        )
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("owner_id", sa.Integer(), nullable=True, comment="the job's owner, for usage")
        )
        batch_op.add_column(
            sa.Column(
                "device_count",
                sa.Integer(),
                nullable=True,
                comment="devices over all its slices",
            )
        )
        batch_op.add_column(
            sa.Column(
                "allocated_device_seconds",
                sa.Float(),
                nullable=True,
                comment="devices x seconds from claim to end; set when the attempt has ended",
            )
        )
        batch_op.add_column(
            sa.Column(
                "busy_device_seconds",
                sa.Float(),
                nullable=True,
                comment="allocated, weighted by each device's sampled utilization",
            )
        )
        batch_op.create_index(batch_op.f("ix_attempts_owner_id"), ["owner_id"], unique=False)
    op.create_table(
        "user_limits",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("share", sa.Float(), nullable=False, comment="fair-share weight"),
        sa.Column("max_devices", sa.Integer(), nullable=True, comment="devices in use at once"),
        sa.Column(
            "max_device_hours",
            sa.Float(),
            nullable=True,
            comment="device-hours allocated per rolling 7 days",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_user_limits_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("user_id", name=op.f("pk_user_limits")),
    )


def downgrade() -> None:
    op.drop_table("user_limits")
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_attempts_owner_id"))
        batch_op.drop_column("busy_device_seconds")
        batch_op.drop_column("allocated_device_seconds")
        batch_op.drop_column("device_count")
        batch_op.drop_column("owner_id")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("queue_position")
        batch_op.drop_column("preempted_by")
        batch_op.drop_column("preempted_at")
