"""webhooks: per-user and admin-wide webhooks, their deliveries, and the job-event cursor

Create Date: 2026-11-25 11:08:26

`webhooks` (url, HMAC secret, events; `all_jobs` for admin-wide ones), one
`webhook_deliveries` row per event and webhook (its tries and last answer), and
`webhook_cursor`, the newest job event already turned into deliveries.
"""

import sqlalchemy as sa
from alembic import op

from migrations.helpers import column, create_index, drop_index, foreign_key, primary_key, required

revision: str = "0015"
down_revision: str | None = "0014"


def upgrade() -> None:
    op.create_table(
        "webhook_cursor",
        required("id", sa.Integer()),
        required("last_event_id", sa.Integer()),
        primary_key("webhook_cursor"),
    )
    op.create_table(
        "webhooks",
        required("id", sa.Integer()),
        required("owner_id", sa.Integer()),
        required("all_jobs", sa.Boolean(), "admin-wide: every user's jobs, not only the owner's"),
        required("url", sa.String(length=2048)),
        required("secret", sa.String(length=128), "HMAC-SHA256 key of the signature"),
        required("events", sa.JSON(), "event names it receives"),
        required("created_at", sa.DateTime(timezone=True)),
        foreign_key("webhooks", "owner_id", "users"),
        primary_key("webhooks"),
    )
    create_index("webhooks", "owner_id")
    op.create_table(
        "webhook_deliveries",
        required("id", sa.Integer()),
        required("webhook_id", sa.Integer()),
        column("job_id", sa.Integer()),
        required("event", sa.String(length=32)),
        required("payload", sa.JSON()),
        required("state", sa.String(length=16), "pending, delivered or failed"),
        required("tries", sa.Integer()),
        required("next_at", sa.DateTime(timezone=True)),
        column("response_status", sa.Integer()),
        column("response_body", sa.Text()),
        column("error", sa.Text()),
        required("created_at", sa.DateTime(timezone=True)),
        column("delivered_at", sa.DateTime(timezone=True)),
        foreign_key("webhook_deliveries", "job_id", "jobs"),
        foreign_key("webhook_deliveries", "webhook_id", "webhooks"),
        primary_key("webhook_deliveries"),
    )
    create_index("webhook_deliveries", "state")
    create_index("webhook_deliveries", "webhook_id")


def downgrade() -> None:
    drop_index("webhook_deliveries", "webhook_id")
    drop_index("webhook_deliveries", "state")
    op.drop_table("webhook_deliveries")
    drop_index("webhooks", "owner_id")
    op.drop_table("webhooks")
    op.drop_table("webhook_cursor")
