"""metric_summaries: each job's metric summarised (final, best, min, max) for the run table

Create Date: 2026-11-25 13:00:00

One row per (job, metric), kept current by the summaries loop
(backend/telemetry/series/summaries.py) from the same curves compare reads, so the run
table sorts and pages 10,000 jobs by a metric without reading any curve.
"""

import sqlalchemy as sa
from alembic import op

from migrations.helpers import BIG_ID, column, create_index, drop_index, foreign_key, primary_key
from migrations.helpers import required, unique

revision: str = "0016"
down_revision: str | None = "0015"


def upgrade() -> None:
    op.create_table(
        "metric_summaries",
        required("id", BIG_ID),
        required("job_id", sa.Integer()),
        required("name", sa.String(length=128)),
        column("final", sa.Float()),
        column("final_step", sa.Integer()),
        column("best", sa.Float()),
        column("best_step", sa.Integer()),
        column("min", sa.Float()),
        column("max", sa.Float()),
        column(
            "direction",
            sa.String(length=8),
            "min or max: which end is best; null: neither (grad_norm, lr)",
        ),
        required("watermark", sa.BigInteger(), "newest marked point id the summary covers"),
        foreign_key("metric_summaries", "job_id", "jobs"),
        primary_key("metric_summaries"),
        unique("metric_summaries", "job_id", "name"),
    )
    create_index("metric_summaries", "name", "final")
    create_index("metric_summaries", "name", "best")


def downgrade() -> None:
    drop_index("metric_summaries", "name", "best")
    drop_index("metric_summaries", "name", "final")
    op.drop_table("metric_summaries")
