"""slurm_usage: what Slurm's accounting says each Slurm-run attempt was allocated

Create Date: 2026-11-28 18:10:00

One row per attempt run by the Slurm executor, written once its Slurm job has left the
queue: sacct's State, runs, ElapsedRaw and AllocTRES (of the device resource) x ElapsedRaw
(backend.executors.slurm, backend.usage). Nothing before this revision has one.
"""

import sqlalchemy as sa
from alembic import op

from migrations.helpers import foreign_key, primary_key, required

revision: str = "0025"
down_revision: str | None = "0024"


def upgrade() -> None:
    op.create_table(
        "slurm_usage",
        required("attempt_id", sa.Integer()),
        required("slurm_job_id", sa.String(length=32)),
        required("state", sa.String(length=32), "sacct's State of its last run"),
        required("runs", sa.Integer(), "allocation lines sacct keeps (requeues + 1)"),
        required("elapsed_seconds", sa.Float(), "ElapsedRaw over its runs"),
        required(
            "allocated_device_seconds",
            sa.Float(),
            "AllocTRES of the device resource x ElapsedRaw, summed over its runs",
        ),
        required("recorded_at", sa.DateTime(timezone=True)),
        foreign_key("slurm_usage", "attempt_id", "attempts"),
        primary_key("slurm_usage", "attempt_id"),
    )


def downgrade() -> None:
    op.drop_table("slurm_usage")
