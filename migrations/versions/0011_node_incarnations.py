"""node incarnations and fencing; restart back-off; unclaimed-attempt counting

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25 10:30:00

Every worker start registers a new incarnation of its node (`nodes.instance`, a random id
the worker makes at start, and `nodes.incarnation`, counted); a slice records the
instance that claimed it, so a report from an older incarnation is refused. A job waiting
out its restart back-off keeps `jobs.restart_at`; `jobs.unclaimed` counts the attempts no
node claimed in time (platform faults, not the user's restarts).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "instance",
                sa.String(length=64),
                nullable=True,
                comment="the running worker process's own id (new at every worker start)",
            )
        )
        batch_op.add_column(
            sa.Column("incarnation", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(
            sa.Column(
                "state_reason",
                sa.String(length=512),
                nullable=True,
                comment="why the node is lost or misconfigured",
            )
        )
    with op.batch_alter_table("attempt_slices", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "instance",
                sa.String(length=64),
                nullable=True,
                comment="the node instance that claimed it: the fencing token with the attempt id",
            )
        )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "restart_at",
                sa.DateTime(timezone=True),
                nullable=True,
                comment="a restarting job is queued again at this time (back-off)",
            )
        )
        batch_op.add_column(
            sa.Column(
                "unclaimed",
                sa.Integer(),
                nullable=False,
                server_default="0",
                comment="attempts no node claimed in time",
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("unclaimed")
        batch_op.drop_column("restart_at")
    with op.batch_alter_table("attempt_slices", schema=None) as batch_op:
        batch_op.drop_column("instance")
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_column("state_reason")
        batch_op.drop_column("incarnation")
        batch_op.drop_column("instance")
