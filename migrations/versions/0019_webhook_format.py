"""webhook format: json (signed Trainboard body) or slack ({"text": ...})

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-25 12:58:00

`webhooks.format`: how a delivery's body is written; existing webhooks keep `json`.
"""

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"


def upgrade() -> None:
    with op.batch_alter_table("webhooks") as batch:
        batch.add_column(
            sa.Column(
                "format",
                sa.String(length=8),
                nullable=False,
                server_default="json",
                comment="json or slack",
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("webhooks") as batch:
        batch.drop_column("format")
