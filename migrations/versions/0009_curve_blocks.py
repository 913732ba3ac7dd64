"""curve blocks: sealed step ranges of running and finished jobs' curves

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-22 23:30:00.000000

curve_rollups (one row per finished job, metric and width) gives way to curve_blocks
(one row per aligned step range, metric and width, sealed while the job runs) and
curve_seals (how far each curve is sealed, as of which marked point). The rollup loop
rebuilds every job's blocks from the raw points; no data is carried over.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _point(prefix: str) -> list[sa.Column]:
    return [
        sa.Column(f"{prefix}_step", sa.Integer(), nullable=False),
        sa.Column(f"{prefix}_time", sa.Float(), nullable=False),
        sa.Column(f"{prefix}_value", sa.Float(), nullable=False),
    ]


def _keyed(table: str) -> list[sa.schema.SchemaItem]:
    """id, job_id (deleted with the job) and name: the columns every table here starts with."""
    return [
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f(f"fk_{table}_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{table}")),
    ]


def upgrade() -> None:
    op.drop_table("curve_rollups")
    op.create_table(
        "curve_seals",
        *_keyed("curve_seals"),
        sa.Column(
            "sealed_through",
            sa.Integer(),
            nullable=False,
            comment="steps below this are in curve_blocks",
        ),
        sa.Column(
            "watermark", sa.BigInteger(), nullable=False, comment="newest marked point id covered"
        ),
        sa.UniqueConstraint("job_id", "name", name=op.f("uq_curve_seals_job_id_name")),
    )
    op.create_table(
        "curve_blocks",
        *_keyed("curve_blocks"),
        sa.Column("width", sa.Integer(), nullable=False, comment="steps per bucket"),
        sa.Column("start_step", sa.Integer(), nullable=False),
        sa.Column(
            "end_step",
            sa.Integer(),
            nullable=False,
            comment="exclusive; steps up to it are in the block",
        ),
        sa.Column("buckets", sa.Integer(), nullable=False),
        *_point("first"),
        *_point("last"),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.UniqueConstraint(
            "job_id",
            "name",
            "width",
            "start_step",
            name=op.f("uq_curve_blocks_job_id_name_width_start_step"),
        ),
    )


def downgrade() -> None:
    op.drop_table("curve_blocks")
    op.drop_table("curve_seals")
    op.create_table(
        "curve_rollups",
        *_keyed("curve_rollups"),
        sa.Column("width", sa.Integer(), nullable=False, comment="steps per bucket"),
        sa.Column(
            "through_attempt_id",
            sa.Integer(),
            nullable=False,
            comment="newest attempt the curve covers",
        ),
        sa.Column(
            "steps", sa.Integer(), nullable=False, comment="points of the full per-step curve"
        ),
        sa.Column("buckets", sa.Integer(), nullable=False),
        *_point("first"),
        *_point("last"),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.UniqueConstraint(
            "job_id", "name", "width", name=op.f("uq_curve_rollups_job_id_name_width")
        ),
    )
