"""node interface and run-root group (multi-host)

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25 10:45:00

A node registers the network interface of the address it advertises (`nodes.interface`,
its ranks are pinned to it) and which other nodes' storage markers it sees in its run
root; `nodes.storage` groups the nodes that share one, and multi-node jobs are placed
only inside a group.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "interface",
                sa.String(length=64),
                nullable=True,
                comment="the network interface of the advertised address (ranks use it)",
            )
        )
        batch_op.add_column(
            sa.Column(
                "storage",
                sa.String(length=64),
                nullable=True,
                comment="run-root group: nodes with the same value see each other's files",
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_column("storage")
        batch_op.drop_column("interface")
