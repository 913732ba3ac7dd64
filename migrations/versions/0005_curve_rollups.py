"""curve rollups

Create Date: 2026-11-22 20:05:37.358324
"""

from alembic import op

from migrations.helpers import curve_rollups

revision: str = "0005"
down_revision: str | None = "0004"


def upgrade() -> None:
    op.create_table("curve_rollups", *curve_rollups())


def downgrade() -> None:
    op.drop_table("curve_rollups")
