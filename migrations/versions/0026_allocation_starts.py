"""allocation_starts: when a cluster manager allocated an attempt's devices, before its claim

Create Date: 2026-11-28 22:20:00

One row per attempt run by the Slurm executor, written the first time squeue shows its
Slurm job running: the allocation's start (squeue's StartTime). Trainboard's allocated
device-seconds count from it instead of the supervisor's claim (backend.usage.accounting).
Nothing before this revision has one (those attempts count from their claim, as before).
"""

import sqlalchemy as sa
from alembic import op

from migrations.helpers import foreign_key, primary_key, required

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
        foreign_key("allocation_starts", "attempt_id", "attempts"),
        primary_key("allocation_starts", "attempt_id"),
    )


def downgrade() -> None:
    op.drop_table("allocation_starts")
