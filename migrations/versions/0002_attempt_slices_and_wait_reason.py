"""attempt slices and wait reason

Create Date: 2026-11-22 17:52:51.965963
"""

import sqlalchemy as sa
from alembic import op

from migrations.helpers import add_columns, column, create_index, drop_columns, drop_index
from migrations.helpers import foreign_key, primary_key, required, unique

revision: str = '0002'
down_revision: str | None = '0001'


def upgrade() -> None:
    op.create_table(
        "attempt_slices",
        required("id", sa.Integer()),
        required("attempt_id", sa.Integer()),
        required("node_name", sa.String(length=64)),
        required("node_rank", sa.Integer()),
        required("devices", sa.JSON()),
        required("state", sa.String(length=16)),
        column("claimed_at", sa.DateTime(timezone=True)),
        column("finished_at", sa.DateTime(timezone=True)),
        foreign_key("attempt_slices", "attempt_id", "attempts"),
        primary_key("attempt_slices"),
        unique("attempt_slices", "attempt_id", "node_name"),
    )
    create_index("attempt_slices", "attempt_id")
    create_index("attempt_slices", "node_name")
    add_columns("jobs", column("wait_reason", sa.String(length=256), "why it is still queued"))


def downgrade() -> None:
    drop_columns("jobs", "wait_reason")
    drop_index("attempt_slices", "node_name")
    drop_index("attempt_slices", "attempt_id")
    op.drop_table("attempt_slices")
