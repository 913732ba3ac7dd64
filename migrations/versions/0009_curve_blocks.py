"""curve blocks: sealed step ranges of running and finished jobs' curves

Create Date: 2026-11-22 23:30:00.000000

curve_rollups (one row per finished job, metric and width) gives way to curve_blocks
(one row per aligned step range, metric and width, sealed while the job runs) and
curve_seals (how far each curve is sealed, as of which marked point). The rollup loop
rebuilds every job's blocks from the raw points; no data is carried over.
"""

import sqlalchemy as sa
from alembic import op

from migrations.helpers import curve_point, curve_rollups, keyed_by_job_metric, required, unique

revision: str = "0009"
down_revision: str | None = "0008"


def upgrade() -> None:
    op.drop_table("curve_rollups")
    op.create_table(
        "curve_seals",
        *keyed_by_job_metric("curve_seals"),
        required("sealed_through", sa.Integer(), "steps below this are in curve_blocks"),
        required("watermark", sa.BigInteger(), "newest marked point id covered"),
        unique("curve_seals", "job_id", "name"),
    )
    op.create_table(
        "curve_blocks",
        *keyed_by_job_metric("curve_blocks"),
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
    op.create_table("curve_rollups", *curve_rollups())
