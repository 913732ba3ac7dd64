"""log lines capped per attempt: the counts stored and dropped, an index to find the oldest

Create Date: 2026-11-28 03:20:00

`attempts.log_lines` counts the lines stored of each attempt (filled here from the rows
already there), `attempts.log_lines_dropped` the oldest lines the ingest deleted over the
per-attempt cap (TRAINBOARD_LOG_LINES_PER_ATTEMPT); the index on log_lines (attempt_id, id)
finds an attempt's oldest lines. A downgrade drops all three (the lines dropped stay gone).
"""

import sqlalchemy as sa
from alembic import op

from migrations.helpers import add_columns, create_index, drop_columns, drop_index, required

revision: str = "0022"
down_revision: str | None = "0021"

STORED = "log lines stored (counted at ingest)"
DROPPED = "oldest log lines deleted over the per-attempt cap"


def upgrade() -> None:
    add_columns(
        "attempts",
        required("log_lines", sa.Integer(), STORED, server_default="0"),
        required("log_lines_dropped", sa.Integer(), DROPPED, server_default="0"),
    )
    op.execute(
        "UPDATE attempts SET log_lines ="
        " (SELECT count(*) FROM log_lines WHERE log_lines.attempt_id = attempts.id)"
        " WHERE EXISTS (SELECT 1 FROM log_lines WHERE log_lines.attempt_id = attempts.id)"
    )
    create_index("log_lines", "attempt_id", "id")


def downgrade() -> None:
    drop_index("log_lines", "attempt_id", "id")
    drop_columns("attempts", "log_lines_dropped", "log_lines")
