"""webhook format: json (signed Trainboard body) or slack ({"text": ...})

Create Date: 2026-11-25 12:58:00

`webhooks.format`: how a delivery's body is written; existing webhooks keep `json`.
"""

import sqlalchemy as sa

from migrations.helpers import adding, required

#: what this revision adds, per table (dropped again in reverse order)
ADDED = {
    "webhooks": (
        required("format", sa.String(length=8), "json or slack", server_default="json"),
    )
}

revision: str = "0019"
down_revision: str | None = "0018"

upgrade, downgrade = adding(ADDED)
