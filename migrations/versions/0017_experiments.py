"""experiments: sweeps, and per-job name/notes/archive, sweep link, provenance, clone point

Revision ID: 0017
Revises: 0016
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

revision: str = "0017"
down_revision: str | None = "0016"


def upgrade() -> None:
    op.create_table(
        "sweeps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False, comment="method, space, rule, base spec"),
        sa.Column("trials", sa.JSON(), nullable=False, comment="the expanded settings, in order"),
        sa.Column("max_concurrency", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_sweeps_owner_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sweeps")),
    )
    op.create_index(op.f("ix_sweeps_owner_id"), "sweeps", ["owner_id"], unique=False)
    op.create_index(op.f("ix_sweeps_state"), "sweeps", ["state"], unique=False)
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("notes", sa.Text(), nullable=True))
        batch.add_column(
            sa.Column(
                "archived",
                sa.Boolean(),
                nullable=False,
                server_default=sa.false(),
                comment="hidden from the board unless asked for",
            )
        )
        batch.add_column(sa.Column("sweep_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("sweep_trial", sa.Integer(), nullable=True))
        batch.add_column(
            sa.Column(
                "early_stop", sa.Text(), nullable=True, comment="why a sweep's rule stopped it"
            )
        )
        batch.add_column(
            sa.Column(
                "provenance",
                sa.JSON(),
                nullable=True,
                comment="recorded by the control plane: script tree hash, git commit, diff",
            )
        )
        batch.add_column(
            sa.Column(
                "reported_env",
                sa.JSON(),
                nullable=True,
                comment="python, torch, packages as reported by the job (untrusted)",
            )
        )
        batch.add_column(
            sa.Column(
                "start_checkpoint",
                sa.Text(),
                nullable=True,
                comment="a clone from step N starts from this checkpoint",
            )
        )
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
        for column in (
            "start_checkpoint",
            "reported_env",
            "provenance",
            "early_stop",
            "sweep_trial",
            "sweep_id",
            "archived",
            "notes",
        ):
            batch.drop_column(column)
    op.drop_index(op.f("ix_sweeps_state"), table_name="sweeps")
    op.drop_index(op.f("ix_sweeps_owner_id"), table_name="sweeps")
    op.drop_table("sweeps")
