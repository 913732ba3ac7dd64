"""metric points take ids in blocks of 1024: one nextval per block instead of one per row

Create Date: 2026-11-22 23:50:00.000000

The ingest's COPY gives each row an id from a block it took with one nextval (see
backend/telemetry/ingest/store.py); a row inserted with the column's default takes a whole
block. PostgreSQL only: SQLite numbers rows itself.
"""

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"

BLOCK = 1024


def _set_increment(increment: int) -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER SEQUENCE metric_points_id_seq INCREMENT BY {increment}")


def upgrade() -> None:
    _set_increment(BLOCK)


def downgrade() -> None:
    _set_increment(1)
