"""metric points: no primary key index on id (PostgreSQL); marked rows indexed by id

Create Date: 2026-11-29 08:30:00.000000

On PostgreSQL the primary key of metric_points was a second unique index on every row
besides the idempotency key (attempt_id, name, step, rank), which is what makes a replayed
point a no-op. Maintaining it was a large part of the server's CPU per point written
(docs/benchmarks.md, "Telemetry ingest throughput"). The ids stay: they come from
metric_points_id_seq (in blocks, migration 0008), unique by construction, and the marked
rows are what reads by id need: the series cache and the curve seals read them through
ix_metric_points_marks, and the summaries' "marked rows since an id" through the new
partial index ix_metric_points_mark_ids (one entry per series and transaction). SQLite keeps
its INTEGER PRIMARY KEY: that is its rowid (how it numbers rows), not an extra index. The
ORM still maps id as the primary key (it is unique).

Upgrade: dropping the constraint is immediate; the new index reads the table once. Downgrade
builds the primary key index again (reads and sorts the whole table).
"""

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"


def upgrade() -> None:
    op.create_index(
        "ix_metric_points_mark_ids",
        "metric_points",
        ["id"],
        unique=False,
        postgresql_where=sa.text("mark"),
        sqlite_where=sa.text("mark"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint("pk_metric_points", "metric_points", type_="primary")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.create_primary_key("pk_metric_points", "metric_points", ["id"])
    op.drop_index("ix_metric_points_mark_ids", table_name="metric_points")
