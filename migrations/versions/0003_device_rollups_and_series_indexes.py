"""device rollups and series indexes

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 18:03:35.849477
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('device_rollups',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('node', sa.String(length=64), nullable=False),
    sa.Column('device', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=8), nullable=False),
    sa.Column('start', sa.Float(), nullable=False, comment='bucket start, unix seconds'),
    sa.Column('seconds', sa.Integer(), nullable=False, comment='bucket width'),
    sa.Column('samples', sa.Integer(), nullable=False),
    sa.Column('util_min', sa.Float(), nullable=True),
    sa.Column('util_mean', sa.Float(), nullable=True),
    sa.Column('util_max', sa.Float(), nullable=True),
    sa.Column('mem_used_min', sa.Float(), nullable=True),
    sa.Column('mem_used_mean', sa.Float(), nullable=True),
    sa.Column('mem_used_max', sa.Float(), nullable=True),
    sa.Column('mem_total', sa.BigInteger(), nullable=True),
    sa.Column('temperature_max', sa.Float(), nullable=True),
    sa.Column('power_mean', sa.Float(), nullable=True),
    sa.Column('power_max', sa.Float(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_device_rollups')),
    sa.UniqueConstraint('node', 'device', 'start', name=op.f('uq_device_rollups_node_device_start'))
    )
    with op.batch_alter_table('device_rollups', schema=None) as batch_op:
        batch_op.create_index('ix_device_rollups_start', ['start'], unique=False)

    with op.batch_alter_table('device_samples', schema=None) as batch_op:
        batch_op.create_index('ix_device_samples_time', ['time'], unique=False)

    with op.batch_alter_table('metric_points', schema=None) as batch_op:
        batch_op.create_index('ix_metric_points_attempt_id_name_id', ['attempt_id', 'name', 'id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('metric_points', schema=None) as batch_op:
        batch_op.drop_index('ix_metric_points_attempt_id_name_id')

    with op.batch_alter_table('device_samples', schema=None) as batch_op:
        batch_op.drop_index('ix_device_samples_time')

    with op.batch_alter_table('device_rollups', schema=None) as batch_op:
        batch_op.drop_index('ix_device_rollups_start')

    op.drop_table('device_rollups')
