"""experiments: sweeps, and per-job name/notes/archive, sweep link, provenance, clone point

Create Date: 2026-11-25 12:55:00

`sweeps` (a search over settings: its method, space, early-stopping rule and
max-concurrency; its trials are jobs with `jobs.sweep_id`). On `jobs`: `notes`
(markdown), `archived` (hidden from the board by default), `sweep_id`,
`early_stop` (why a sweep's rule stopped the trial), `provenance` (what the
control plane recorded: script tree hash, git commit and dirty diff),
`reported_env` (interpreter, torch, packages as reported by the job's side) and
`start_checkpoint` (the checkpoint a clone from step N starts from).
"""

import sqlalchemy as sa
from alembic import op

from migrations.helpers import column, create_index, drop_index, foreign_key, primary_key, required

#: the columns jobs gain, dropped again in reverse order
JOB_COLUMNS = (
    column("notes", sa.Text()),
    required(
        "archived",
        sa.Boolean(),
        "hidden from the board unless asked for",
        server_default=sa.false(),
    ),
    column("sweep_id", sa.Integer()),
    column("sweep_trial", sa.Integer()),
    column("early_stop", sa.Text(), "why a sweep's rule stopped it"),
    column(
        "provenance",
        sa.JSON(),
        "recorded by the control plane: script tree hash, git commit, diff",
    ),
    column(
        "reported_env",
        sa.JSON(),
        "python, torch, packages as reported by the job (untrusted)",
    ),
    column("start_checkpoint", sa.Text(), "a clone from step N starts from this checkpoint"),
)

revision: str = "0017"
down_revision: str | None = "0016"


def upgrade() -> None:
    op.create_table(
        "sweeps",
        required("id", sa.Integer()),
        required("name", sa.String(length=128)),
        required("owner_id", sa.Integer()),
        required("state", sa.String(length=16)),
        required("config", sa.JSON(), "method, space, rule, base spec"),
        required("trials", sa.JSON(), "the expanded settings, in order"),
        required("max_concurrency", sa.Integer()),
        required("created_at", sa.DateTime(timezone=True)),
        column("finished_at", sa.DateTime(timezone=True)),
        foreign_key("sweeps", "owner_id", "users"),
        primary_key("sweeps"),
    )
    create_index("sweeps", "owner_id")
    create_index("sweeps", "state")
    with op.batch_alter_table("jobs") as batch:
        for new in JOB_COLUMNS:
            batch.add_column(new)
        batch.create_foreign_key(
            op.f("fk_jobs_sweep_id_sweeps"), "sweeps", ["sweep_id"], ["id"], ondelete="SET NULL"
        )
        batch.create_index(op.f("ix_jobs_sweep_id"), ["sweep_id"], unique=False)
        batch.create_index(op.f("ix_jobs_archived"), ["archived"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index(op.f("ix_jobs_archived"))
        batch.drop_index(op.f("ix_jobs_sweep_id"))
        batch.drop_constraint(op.f("fk_jobs_sweep_id_sweeps"), type_="foreignkey")
        for gone in reversed(JOB_COLUMNS):
            batch.drop_column(gone.name)
    drop_index("sweeps", "state")
    drop_index("sweeps", "owner_id")
    op.drop_table("sweeps")
