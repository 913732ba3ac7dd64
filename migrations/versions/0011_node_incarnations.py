"""node incarnations and fencing; restart back-off; unclaimed-attempt counting

Create Date: 2026-11-25 10:30:00

Every worker start registers a new incarnation of its node (`nodes.instance`, a random id
the worker makes at start, and `nodes.incarnation`, counted); a slice records the
instance that claimed it, so a report from an older incarnation is refused. A job waiting
out its restart back-off keeps `jobs.restart_at`; `jobs.unclaimed` counts the attempts no
node claimed in time (platform faults, not the user's restarts).
"""

import sqlalchemy as sa

from migrations.helpers import adding, column, required

#: what this revision adds, per table (dropped again in reverse order)
ADDED = {
    "nodes": (
        column(
            "instance",
            sa.String(length=64),
            "the running worker process's own id (new at every worker start)",
        ),
        required("incarnation", sa.Integer(), server_default="0"),
        column("state_reason", sa.String(length=512), "why the node is lost or misconfigured"),
    ),
    "attempt_slices": (
        column(
            "instance",
            sa.String(length=64),
            "the node instance that claimed it: the fencing token with the attempt id",
        ),
    ),
    "jobs": (
        column(
            "restart_at",
            sa.DateTime(timezone=True),
            "a restarting job is queued again at this time (back-off)",
        ),
        required("unclaimed", sa.Integer(), "attempts no node claimed in time", server_default="0"),
    ),
}

revision: str = "0011"
down_revision: str | None = "0010"

upgrade, downgrade = adding(ADDED)
