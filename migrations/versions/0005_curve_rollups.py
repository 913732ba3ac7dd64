"""curve rollups

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 20:05:37.358324
"""

import sqlalchemy as sa
from alembic import op

from migrations.helpers import BIG_ID, curve_point, foreign_key, primary_key, required, unique

revision: str = '0005'
down_revision: str | None = '0004'


def upgrade() -> None:
    op.create_table(
        "curve_rollups",
        required("id", BIG_ID),
        required("job_id", sa.Integer()),
        required("name", sa.String(length=128)),
        required("width", sa.Integer(), "steps per bucket"),
        required("through_attempt_id", sa.Integer(), "newest attempt the curve covers"),
        required("steps", sa.Integer(), "points of the full per-step curve"),
        required("buckets", sa.Integer()),
        *curve_point("first"),
        *curve_point("last"),
        required("data", sa.LargeBinary()),
        foreign_key("curve_rollups", "job_id", "jobs"),
        primary_key("curve_rollups"),
        unique("curve_rollups", "job_id", "name", "width"),
    )


def downgrade() -> None:
    op.drop_table("curve_rollups")
