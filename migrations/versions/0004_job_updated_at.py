"""job updated_at

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 18:55:22.421404
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # nullable first, filled from created_at for existing jobs, then required
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "updated_at",
                sa.DateTime(timezone=True),
                nullable=True,
                comment="any change, progress included; orders job views",
            )
        )
    op.execute("UPDATE jobs SET updated_at = created_at")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.alter_column(
            "updated_at",
            existing_type=sa.DateTime(timezone=True),
            nullable=False,
            existing_comment="any change, progress included; orders job views",
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("updated_at")
