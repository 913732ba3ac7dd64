"""node interface and run-root group (multi-host)

Create Date: 2026-11-25 10:45:00

A node registers the network interface of the address it advertises (`nodes.interface`,
its ranks are pinned to it) and which other nodes' storage markers it sees in its run
root; `nodes.storage` groups the nodes that share one, and multi-node jobs are placed
only inside a group.
"""

import sqlalchemy as sa

from migrations.helpers import adding, column

#: what this revision adds, per table (dropped again in reverse order)
ADDED = {
    "nodes": (
        column(
            "interface",
            sa.String(length=64),
            "the network interface of the advertised address (ranks use it)",
        ),
        column(
            "storage",
            sa.String(length=64),
            "run-root group: nodes with the same value see each other's files",
        ),
    )
}

revision: str = "0013"
down_revision: str | None = "0012"

upgrade, downgrade = adding(ADDED)
