"""a job's out-of-memory reductions are a column, not a count of its events

Create Date: 2026-11-28 15:10:00

`jobs.oom_reductions` is how many times out-of-memory remediation halved the job's
micro-batch (health.on_oom: reduce_microbatch); the next attempt runs that reduced shape.
It was counted from `oom_remediation` job events at every placement; filled here from them.
"""

from alembic import op
import sqlalchemy as sa

from migrations.helpers import add_columns, drop_columns, required

revision: str = "0023"
down_revision: str | None = "0022"


def upgrade() -> None:
    add_columns(
        "jobs",
        required(
            "oom_reductions",
            sa.Integer(),
            "micro-batch halvings made by out-of-memory remediation",
            server_default="0",
        ),
    )
    op.execute(
        "UPDATE jobs SET oom_reductions = (SELECT count(*) FROM job_events"
        " WHERE job_events.job_id = jobs.id AND job_events.kind = 'oom_remediation')"
        " WHERE EXISTS (SELECT 1 FROM job_events"
        " WHERE job_events.job_id = jobs.id AND job_events.kind = 'oom_remediation')"
    )


def downgrade() -> None:
    drop_columns("jobs", "oom_reductions")
