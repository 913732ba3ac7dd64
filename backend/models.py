"""Every ORM model, imported in one place so Alembic and tests see the whole schema."""

from backend.auth.models import ApiToken, User
from backend.db import Base
from backend.jobs.models import Attempt, AttemptSlice, Job, JobEvent
from backend.nodes.deployment import Deployment
from backend.nodes.models import Device, Node
from backend.sweeps.models import Sweep
from backend.telemetry.models import DeviceRollup, DeviceSample, LogLine, MetricPoint
from backend.usage.models import AllocationStart, SlurmUsage, UserLimits
from backend.webhooks.models import Webhook, WebhookCursor, WebhookDelivery

__all__ = [
    "AllocationStart",
    "ApiToken",
    "Attempt",
    "AttemptSlice",
    "Base",
    "Deployment",
    "Device",
    "DeviceRollup",
    "DeviceSample",
    "Job",
    "JobEvent",
    "LogLine",
    "MetricPoint",
    "Node",
    "SlurmUsage",
    "Sweep",
    "User",
    "UserLimits",
    "Webhook",
    "WebhookCursor",
    "WebhookDelivery",
]
