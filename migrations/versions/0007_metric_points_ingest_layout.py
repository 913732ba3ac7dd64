"""metric points: key in arrival order, marked rows for the series cache, no foreign key

Create Date: 2026-11-22 20:40:00.000000

The idempotency key becomes (attempt_id, name, step, rank), so inserts append to each
series' index range; the series index (attempt_id, name, id) keeps only marked rows (see
MetricPoint); the foreign key to attempts goes (its per-row check was the largest cost of
the ingest on PostgreSQL).
"""

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"


def upgrade() -> None:
    with op.batch_alter_table("metric_points", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("mark", sa.Boolean(), server_default=sa.true(), nullable=False)
        )
        batch_op.drop_index("ix_metric_points_attempt_id_name_id")
        batch_op.drop_constraint("uq_metric_points_attempt_id_name_rank_step", type_="unique")
        batch_op.drop_constraint("fk_metric_points_attempt_id_attempts", type_="foreignkey")
        batch_op.create_unique_constraint(
            batch_op.f("uq_metric_points_attempt_id_name_step_rank"),
            ["attempt_id", "name", "step", "rank"],
        )
        batch_op.create_index(
            "ix_metric_points_marks",
            ["attempt_id", "name", "id"],
            unique=False,
            postgresql_where=sa.text("mark"),
            sqlite_where=sa.text("mark"),
        )


def downgrade() -> None:
    # points of attempts that no longer exist could not have been stored with the key
    op.execute("DELETE FROM metric_points WHERE attempt_id NOT IN (SELECT id FROM attempts)")
    with op.batch_alter_table("metric_points", schema=None) as batch_op:
        batch_op.drop_index("ix_metric_points_marks")
        batch_op.drop_constraint("uq_metric_points_attempt_id_name_step_rank", type_="unique")
        batch_op.create_foreign_key(
            batch_op.f("fk_metric_points_attempt_id_attempts"),
            "attempts",
            ["attempt_id"],
            ["id"],
            ondelete="CASCADE",
        )
        batch_op.create_unique_constraint(
            batch_op.f("uq_metric_points_attempt_id_name_rank_step"),
            ["attempt_id", "name", "rank", "step"],
        )
        batch_op.create_index(
            "ix_metric_points_attempt_id_name_id", ["attempt_id", "name", "id"], unique=False
        )
        batch_op.drop_column("mark")
