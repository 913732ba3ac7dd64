"""attempts.allocated_device_seconds: its comment says where it counts from

Create Date: 2026-11-29 01:50:00

Since 0026 an attempt's allocated device-seconds count from its allocation's start, where a
cluster manager recorded one (the Slurm job's StartTime, `allocation_starts`), else from
its claim (backend.usage.accounting); the column's comment still said "from claim to end".
PostgreSQL only: SQLite keeps no column comments (its dialect drops them when it creates a
table, and compare_metadata reads none back), so there is nothing to change there.
"""

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"

BEFORE = "devices x seconds from claim to end; set when the attempt has ended"
AFTER = (
    "devices x seconds from the allocation's start (a Slurm job's StartTime, "
    "allocation_starts; else the claim) to end; set when the attempt has ended"
)


def _comment(comment: str, was: str) -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column(
            "attempts",
            "allocated_device_seconds",
            existing_type=sa.Float(),
            existing_nullable=True,
            comment=comment,
            existing_comment=was,
        )


def upgrade() -> None:
    _comment(AFTER, BEFORE)


def downgrade() -> None:
    _comment(BEFORE, AFTER)
