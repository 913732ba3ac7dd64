"""curve rollups

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 20:05:37.358324
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('curve_rollups',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('width', sa.Integer(), nullable=False, comment='steps per bucket'),
    sa.Column('through_attempt_id', sa.Integer(), nullable=False, comment='newest attempt the curve covers'),
    sa.Column('steps', sa.Integer(), nullable=False, comment='points of the full per-step curve'),
    sa.Column('buckets', sa.Integer(), nullable=False),
    sa.Column('first_step', sa.Integer(), nullable=False),
    sa.Column('first_time', sa.Float(), nullable=False),
    sa.Column('first_value', sa.Float(), nullable=False),
    sa.Column('last_step', sa.Integer(), nullable=False),
    sa.Column('last_time', sa.Float(), nullable=False),
    sa.Column('last_value', sa.Float(), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_curve_rollups_job_id_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_curve_rollups')),
    sa.UniqueConstraint('job_id', 'name', 'width', name=op.f('uq_curve_rollups_job_id_name_width'))
    )


def downgrade() -> None:
    op.drop_table('curve_rollups')
