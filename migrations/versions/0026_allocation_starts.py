"""allocation_starts: when a cluster manager allocated an attempt's devices, before its claim

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28 22:20:00

One row per attempt run by the Slurm executor, written the first time squeue shows its
Slurm job running: the allocation's start (squeue's StartTime). Trainboard's allocated
device-seconds count from it instead of the supervisor's claim (backend.usage.accounting).
Nothing before this revision has one (those attempts count from their claim, as before).
"""

import sqlalchemy as sa
from alembic import op

from migrations.helpers import required

revision: str = "0026"
down_revision: str | None = "0025"


def upgrade() -> None:
    op.create_table(
        "allocation_starts",
        required("attempt_id", sa.Integer()),
        required(
            "started_at",
            sa.DateTime(timezone=True),
            "the allocation's start as the cluster manager records it",
        ),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["attempts.id"],
            name=op.f("fk_allocation_starts_attempt_id_attempts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("attempt_id", name=op.f("pk_allocation_starts")),
    )


def downgrade() -> None:
    op.drop_table("allocation_starts")
