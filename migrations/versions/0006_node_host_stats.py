"""node host stats: the machine's CPU and memory at the last heartbeat

Create Date: 2026-11-22 20:40:00
"""

import sqlalchemy as sa

from migrations.helpers import adding, column

#: what this revision adds, per table (dropped again in reverse order)
ADDED = {
    "nodes": (
        column("host_cpu_percent", sa.Float(), "machine CPU use at the last heartbeat, all cores"),
        column("host_cpus", sa.Integer()),
        column("host_memory_used", sa.BigInteger()),
        column("host_memory_total", sa.BigInteger()),
    )
}

revision: str = "0006"
down_revision: str | None = "0005"

upgrade, downgrade = adding(ADDED)
