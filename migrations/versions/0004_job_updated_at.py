"""job updated_at

Create Date: 2026-11-22 18:55:22.421404
"""

import sqlalchemy as sa
from alembic import op

from migrations.helpers import add_columns, column, drop_columns

revision: str = '0004'
down_revision: str | None = '0003'


UPDATED_AT = "any change, progress included; orders job views"


def upgrade() -> None:
    # nullable first, filled from created_at for existing jobs, then required
    add_columns("jobs", column("updated_at", sa.DateTime(timezone=True), UPDATED_AT))
    op.execute("UPDATE jobs SET updated_at = created_at")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.alter_column(
            "updated_at",
            existing_type=sa.DateTime(timezone=True),
            nullable=False,
            existing_comment=UPDATED_AT,
        )


def downgrade() -> None:
    drop_columns("jobs", "updated_at")
