"""the deployment's own id: made at the first migration, named in every Redis key

Create Date: 2026-11-25 10:45:00

A Redis shared by several deployments (or a data dir reset on a used one) must never mix
their control state or telemetry: every key carries this id, and a worker checks that
its Redis holds this deployment's marker before it takes work.
"""

import uuid

import sqlalchemy as sa
from alembic import op

from migrations.helpers import primary_key, required

revision: str = "0012"
down_revision: str | None = "0011"


def upgrade() -> None:
    op.create_table(
        "deployment",
        required("id", sa.String(length=32)),
        required("created_at", sa.DateTime(timezone=True)),
        primary_key("deployment"),
        comment="one row: this deployment's id",
    )
    insert = sa.text("INSERT INTO deployment (id, created_at) VALUES (:id, CURRENT_TIMESTAMP)")
    op.execute(insert.bindparams(id=uuid.uuid4().hex))


def downgrade() -> None:
    op.drop_table("deployment")
