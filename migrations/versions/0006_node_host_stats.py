"""node host stats: the machine's CPU and memory at the last heartbeat

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22 20:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "host_cpu_percent",
                sa.Float(),
                nullable=True,
                comment="machine CPU use at the last heartbeat, all cores",
            )
        )
        batch_op.add_column(sa.Column("host_cpus", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("host_memory_used", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("host_memory_total", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_column("host_memory_total")
        batch_op.drop_column("host_memory_used")
        batch_op.drop_column("host_cpus")
        batch_op.drop_column("host_cpu_percent")
