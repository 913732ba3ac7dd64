"""webhook deliveries keep the answer's status and timing, never its body

Create Date: 2026-11-28 03:00:00

`webhook_deliveries.duration_ms` is added; `response_body` (up to 1 KiB of whatever the
receiver answered, which let a webhook read internal services) is dropped with what it
held. A downgrade brings the column back empty.
"""

import sqlalchemy as sa

from migrations.helpers import add_columns, column, drop_columns

revision: str = "0021"
down_revision: str | None = "0020"

DURATION = "from sending to the answer's status line; null when no status came"


def upgrade() -> None:
    add_columns("webhook_deliveries", column("duration_ms", sa.Integer(), DURATION))
    drop_columns("webhook_deliveries", "response_body")


def downgrade() -> None:
    add_columns("webhook_deliveries", column("response_body", sa.Text()))
    drop_columns("webhook_deliveries", "duration_ms")
