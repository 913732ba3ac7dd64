"""node data dir free space (disk low)

Create Date: 2026-11-25 11:00:00

Each heartbeat reports the free and total bytes of the node's data dir; a node below the
backend's threshold is `disk low` and gets no new work.
"""

import sqlalchemy as sa

from migrations.helpers import adding, column

#: what this revision adds, per table (dropped again in reverse order)
ADDED = {
    "nodes": (
        column("disk_free", sa.BigInteger(), "bytes free in the data dir at the last heartbeat"),
        column("disk_total", sa.BigInteger()),
    )
}

revision: str = "0014"
down_revision: str | None = "0013"

upgrade, downgrade = adding(ADDED)
