"""initial schema

Create Date: 2026-11-22 17:39:21.439259
"""

import sqlalchemy as sa
from alembic import op

from migrations.helpers import BIG_ID, column, create_index, drop_index, foreign_key, primary_key
from migrations.helpers import one_device, required, unique

revision: str = '0001'
down_revision: str | None = None


def upgrade() -> None:
    op.create_table(
        "device_samples",
        *one_device("device_samples"),
        required("time", sa.Float()),
        column("util", sa.Float()),
        column("mem_used", sa.BigInteger()),
        column("mem_total", sa.BigInteger()),
        column("temperature", sa.Float()),
        column("power", sa.Float()),
        column("attempt_id", sa.Integer()),
        column("rank", sa.Integer()),
        unique("device_samples", "node", "device", "time"),
    )
    op.create_table(
        "nodes",
        required("id", sa.Integer()),
        required("name", sa.String(length=64)),
        required("hostname", sa.String(length=255)),
        required("address", sa.String(length=255)),
        required("state", sa.String(length=16)),
        required("drained", sa.Boolean()),
        required("registered_at", sa.DateTime(timezone=True)),
        required("last_heartbeat", sa.DateTime(timezone=True)),
        primary_key("nodes"),
        unique("nodes", "name"),
    )
    op.create_table(
        "users",
        required("id", sa.Integer()),
        required("username", sa.String(length=64)),
        column("password_hash", sa.String(length=255)),
        required("role", sa.String(length=16)),
        required("created_at", sa.DateTime(timezone=True)),
        primary_key("users"),
        unique("users", "username"),
    )
    op.create_table(
        "api_tokens",
        required("id", sa.Integer()),
        required("user_id", sa.Integer()),
        required("token_hash", sa.String(length=64)),
        required("prefix", sa.String(length=16)),
        required("kind", sa.String(length=16)),
        required("name", sa.String(length=128)),
        required("scopes", sa.String(length=128)),
        required("created_at", sa.DateTime(timezone=True)),
        column("expires_at", sa.DateTime(timezone=True)),
        column("revoked_at", sa.DateTime(timezone=True)),
        foreign_key("api_tokens", "user_id", "users"),
        primary_key("api_tokens"),
        unique("api_tokens", "token_hash"),
    )
    create_index("api_tokens", "user_id")
    op.create_table(
        "devices",
        required("id", sa.Integer()),
        required("node_id", sa.Integer()),
        required("index", sa.Integer()),
        required("kind", sa.String(length=8)),
        required("name", sa.String(length=128)),
        column("uuid", sa.String(length=128)),
        column("memory_total", sa.BigInteger()),
        foreign_key("devices", "node_id", "nodes"),
        primary_key("devices"),
        unique("devices", "node_id", "index"),
    )
    op.create_table(
        "jobs",
        required("id", sa.Integer()),
        required("name", sa.String(length=128)),
        required("owner_id", sa.Integer()),
        column("parent_id", sa.Integer()),
        required("state", sa.String(length=16)),
        required("spec", sa.JSON()),
        required("priority_rank", sa.Integer(), "0 high, 1 normal, 2 low"),
        required("devices_requested", sa.Integer()),
        required("attempt", sa.Integer(), "number of the current attempt"),
        required("restarts", sa.Integer()),
        column("stop_request", sa.String(length=16), "cancel or pause"),
        column("reason", sa.Text()),
        required("step", sa.Integer(), "newest step reported"),
        column("total_steps", sa.Integer()),
        required("created_at", sa.DateTime(timezone=True)),
        column("started_at", sa.DateTime(timezone=True)),
        column("finished_at", sa.DateTime(timezone=True)),
        foreign_key("jobs", "owner_id", "users", ondelete=None),
        foreign_key("jobs", "parent_id", "jobs", ondelete=None),
        primary_key("jobs"),
    )
    create_index("jobs", "owner_id")
    create_index("jobs", "state", "priority_rank", "id", name="ix_jobs_queue")
    op.create_table(
        "attempts",
        required("id", sa.Integer()),
        required("job_id", sa.Integer()),
        required("number", sa.Integer()),
        required("node_name", sa.String(length=64)),
        required("devices", sa.JSON()),
        required("state", sa.String(length=16)),
        required("master_port", sa.Integer()),
        column("resume_from", sa.Text()),
        column("last_checkpoint", sa.Text()),
        column("exit_reason", sa.Text()),
        required("created_at", sa.DateTime(timezone=True)),
        column("claimed_at", sa.DateTime(timezone=True)),
        column("finished_at", sa.DateTime(timezone=True)),
        foreign_key("attempts", "job_id", "jobs"),
        primary_key("attempts"),
        unique("attempts", "job_id", "number"),
    )
    create_index("attempts", "job_id")
    op.create_table(
        "job_events",
        required("id", sa.Integer()),
        required("job_id", sa.Integer()),
        column("attempt_id", sa.Integer()),
        required("kind", sa.String(length=64)),
        required("message", sa.Text()),
        column("step", sa.Integer()),
        required("time", sa.DateTime(timezone=True)),
        foreign_key("job_events", "attempt_id", "attempts"),
        foreign_key("job_events", "job_id", "jobs"),
        primary_key("job_events"),
    )
    create_index("job_events", "job_id")
    op.create_table(
        "log_lines",
        required("id", BIG_ID),
        required("attempt_id", sa.Integer()),
        required("rank", sa.Integer()),
        required("stream", sa.String(length=8)),
        required("seq", sa.Integer()),
        required("line", sa.Text()),
        required("time", sa.Float()),
        foreign_key("log_lines", "attempt_id", "attempts"),
        primary_key("log_lines"),
        unique("log_lines", "attempt_id", "rank", "stream", "seq"),
    )
    op.create_table(
        "metric_points",
        required("id", BIG_ID),
        required("attempt_id", sa.Integer()),
        required("rank", sa.Integer()),
        required("step", sa.Integer()),
        required("name", sa.String(length=128)),
        required("value", sa.Float()),
        required("time", sa.Float()),
        foreign_key("metric_points", "attempt_id", "attempts"),
        primary_key("metric_points"),
        unique("metric_points", "attempt_id", "name", "rank", "step"),
    )


def downgrade() -> None:
    op.drop_table("metric_points")
    op.drop_table("log_lines")
    drop_index("job_events", "job_id")
    op.drop_table("job_events")
    drop_index("attempts", "job_id")
    op.drop_table("attempts")
    drop_index("jobs", "state", "priority_rank", "id", name="ix_jobs_queue")
    drop_index("jobs", "owner_id")
    op.drop_table("jobs")
    op.drop_table("devices")
    drop_index("api_tokens", "user_id")
    op.drop_table("api_tokens")
    op.drop_table("users")
    op.drop_table("nodes")
    op.drop_table("device_samples")
