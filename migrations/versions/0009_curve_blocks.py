"""curve blocks: sealed step ranges of running and finished jobs' curves

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-22 23:30:00.000000

curve_rollups (one row per finished job, metric and width) gives way to curve_blocks
(one row per aligned step range, metric and width, sealed while the job runs) and
curve_seals (how far each curve is sealed, as of which marked point). The rollup loop
rebuilds every job's blocks from the raw points; no data is carried over.
"""

import sqlalchemy as sa
from alembic import op

from migrations.helpers import BIG_ID, curve_point, foreign_key, primary_key, required, unique

revision: str = "0009"
down_revision: str | None = "0008"


def _keyed(table: str) -> list[sa.schema.SchemaItem]:
    """id, job_id (deleted with the job) and name: the columns every table here starts with."""
    return [
        required("id", BIG_ID),
        required("job_id", sa.Integer()),
        required("name", sa.String(length=128)),
        foreign_key(table, "job_id", "jobs"),
        primary_key(table),
    ]


def upgrade() -> None:
    op.drop_table("curve_rollups")
    op.create_table(
        "curve_seals",
        *_keyed("curve_seals"),
        required("sealed_through", sa.Integer(), "steps below this are in curve_blocks"),
        required("watermark", sa.BigInteger(), "newest marked point id covered"),
        unique("curve_seals", "job_id", "name"),
    )
    op.create_table(
        "curve_blocks",
        *_keyed("curve_blocks"),
        required("width", sa.Integer(), "steps per bucket"),
        required("start_step", sa.Integer()),
        required("end_step", sa.Integer(), "exclusive; steps up to it are in the block"),
        required("buckets", sa.Integer()),
        *curve_point("first"),
        *curve_point("last"),
        required("data", sa.LargeBinary()),
        unique("curve_blocks", "job_id", "name", "width", "start_step"),
    )


def downgrade() -> None:
    op.drop_table("curve_blocks")
    op.drop_table("curve_seals")
    op.create_table(
        "curve_rollups",
        *_keyed("curve_rollups"),
        required("width", sa.Integer(), "steps per bucket"),
        required("through_attempt_id", sa.Integer(), "newest attempt the curve covers"),
        required("steps", sa.Integer(), "points of the full per-step curve"),
        required("buckets", sa.Integer()),
        *curve_point("first"),
        *curve_point("last"),
        required("data", sa.LargeBinary()),
        unique("curve_rollups", "job_id", "name", "width"),
    )
