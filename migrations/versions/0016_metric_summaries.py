"""metric_summaries: each job's metric summarised (final, best, min, max) for the run table

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25 13:00:00

One row per (job, metric), kept current by the summaries loop
(backend/telemetry/series/summaries.py) from the same curves compare reads, so the run
table sorts and pages 10,000 jobs by a metric without reading any curve.
"""

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "metric_summaries",
        sa.Column("id", BigId, nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("final", sa.Float(), nullable=True),
        sa.Column("final_step", sa.Integer(), nullable=True),
        sa.Column("best", sa.Float(), nullable=True),
        sa.Column("best_step", sa.Integer(), nullable=True),
        sa.Column("min", sa.Float(), nullable=True),
        sa.Column("max", sa.Float(), nullable=True),
        sa.Column(
            "direction",
            sa.String(length=8),
            nullable=True,
            comment="min or max: which end is best; null: neither (grad_norm, lr)",
        ),
        sa.Column(
            "watermark",
            sa.BigInteger(),
            nullable=False,
            comment="newest marked point id the summary covers",
        ),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_metric_summaries_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_metric_summaries")),
        sa.UniqueConstraint("job_id", "name", name=op.f("uq_metric_summaries_job_id_name")),
    )
    op.create_index("ix_metric_summaries_name_final", "metric_summaries", ["name", "final"])
    op.create_index("ix_metric_summaries_name_best", "metric_summaries", ["name", "best"])


def downgrade() -> None:
    op.drop_index("ix_metric_summaries_name_best", table_name="metric_summaries")
    op.drop_index("ix_metric_summaries_name_final", table_name="metric_summaries")
    op.drop_table("metric_summaries")
