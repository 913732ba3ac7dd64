"""device rollups and series indexes

Create Date: 2026-11-22 18:03:35.849477
"""

import sqlalchemy as sa
from alembic import op

from migrations.helpers import column, create_index, drop_index, one_device, required
from migrations.helpers import unique

revision: str = '0003'
down_revision: str | None = '0002'


#: (table, columns) of each index this revision adds
INDEXES = (
    ("device_rollups", ("start",)),
    ("device_samples", ("time",)),
    ("metric_points", ("attempt_id", "name", "id")),
)


def upgrade() -> None:
    op.create_table(
        "device_rollups",
        *one_device("device_rollups"),
        required("start", sa.Float(), "bucket start, unix seconds"),
        required("seconds", sa.Integer(), "bucket width"),
        required("samples", sa.Integer()),
        *(column(f"util_{s}", sa.Float()) for s in ("min", "mean", "max")),
        *(column(f"mem_used_{s}", sa.Float()) for s in ("min", "mean", "max")),
        column("mem_total", sa.BigInteger()),
        column("temperature_max", sa.Float()),
        column("power_mean", sa.Float()),
        column("power_max", sa.Float()),
        unique("device_rollups", "node", "device", "start"),
    )
    for table, columns in INDEXES:
        create_index(table, *columns)


def downgrade() -> None:
    for table, columns in reversed(INDEXES):
        drop_index(table, *columns)
    op.drop_table("device_rollups")
