"""Every ORM model, imported in one place so Alembic and tests see the whole schema."""

from backend.auth.models import ApiToken, User
from backend.db import Base
from backend.jobs.models import Attempt, Job, JobEvent
from backend.nodes.models import Device, Node
from backend.telemetry.models import DeviceSample, LogLine, MetricPoint

__all__ = [
    "ApiToken",
    "Attempt",
    "Base",
    "Device",
    "DeviceSample",
    "Job",
    "JobEvent",
    "LogLine",
    "MetricPoint",
    "Node",
    "User",
]
