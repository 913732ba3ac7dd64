"""attempt facts: what the engine reported it uses (global batch, world size, degrees)

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-25 13:10:00

`attempts.facts`: the engine's start event of the attempt, as reported (NULL until it
starts, and for programs that report none); the job page shows these, not the spec's.
"""

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"


def upgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(
            sa.Column(
                "facts",
                sa.JSON(),
                nullable=True,
                comment="what the engine reported it uses at start (global batch, world size)",
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("facts")
