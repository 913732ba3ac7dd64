"""attempt facts: what the engine reported it uses (global batch, world size, degrees)

Create Date: 2026-11-25 13:10:00

`attempts.facts`: the engine's start event of the attempt, as reported (NULL until it
starts, and for programs that report none); the job page shows these, not the spec's.
"""

import sqlalchemy as sa

from migrations.helpers import adding, column

#: what this revision adds, per table (dropped again in reverse order)
ADDED = {
    "attempts": (
        column(
            "facts",
            sa.JSON(),
            "what the engine reported it uses at start (global batch, world size)",
        ),
    )
}

revision: str = "0020"
down_revision: str | None = "0019"

upgrade, downgrade = adding(ADDED)
