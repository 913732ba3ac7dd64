"""node-bound tokens: a node token names the one node it may act as; nodes report their data dir

Create Date: 2026-11-25 10:00:00

Node tokens minted before this revision name no node: they are refused on the node routes
until an admin mints a bound one (`trainboard token create --scope node --node NAME`).
"""

import sqlalchemy as sa

from migrations.helpers import adding, column

#: what this revision adds, per table (dropped again in reverse order)
ADDED = {
    "api_tokens": (
        column(
            "node_name",
            sa.String(length=64),
            "node tokens: the only node this token may act as",
        ),
    ),
    "nodes": (
        column(
            "data_dir",
            sa.String(length=4096),
            "the node's resolved data dir, as it registered; checkpoints lie under it",
        ),
    ),
}

revision: str = "0010"
down_revision: str | None = "0009"

upgrade, downgrade = adding(ADDED)
