"""node data dir free space (disk low)

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25 11:00:00

Each heartbeat reports the free and total bytes of the node's data dir; a node below the
backend's threshold is `disk low` and gets no new work.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "disk_free",
                sa.BigInteger(),
                nullable=True,
                comment="bytes free in the data dir at the last heartbeat",
            )
        )
        batch_op.add_column(sa.Column("disk_total", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_column("disk_total")
        batch_op.drop_column("disk_free")
