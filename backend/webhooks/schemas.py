"""Webhook bodies: what a user registers, what the API shows back, each delivery."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

EventName = Literal[
    "succeeded", "failed", "preempted", "hung", "straggler", "nan_stop", "oom_remediation"
]
EVENT_NAMES: tuple[EventName, ...] = (
    "succeeded", "failed", "preempted", "hung", "straggler", "nan_stop", "oom_remediation"
)  # fmt: skip
#: json: the signed Trainboard body; slack: {"text": ...} for a Slack-compatible incoming webhook
Format = Literal["json", "slack"]


class WebhookIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=8, max_length=2048, description="http(s) URL the POSTs go to")
    events: list[EventName] = Field(
        default_factory=lambda: list(EVENT_NAMES), min_length=1, max_length=len(EVENT_NAMES)
    )
    all_jobs: bool = Field(False, description="admins only: every user's jobs")
    format: Format = Field("json", description='slack: a {"text": ...} body (still signed)')

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("url must be an http:// or https:// URL with a host")
        if parts.username or parts.password:
            raise ValueError("url must not carry credentials")
        if any(ch.isspace() or ord(ch) < 32 for ch in value):
            raise ValueError("url must not contain spaces or control characters")
        return value


class WebhookOut(BaseModel):
    id: int
    url: str
    events: list[str]
    all_jobs: bool
    format: str
    owner: str
    created_at: datetime


class WebhookCreated(WebhookOut):
    secret: str = Field(description="the HMAC-SHA256 key; shown once")


class DeliveryOut(BaseModel):
    id: int
    event: str
    job_id: int | None
    payload: dict[str, Any]
    state: str
    tries: int
    response_status: int | None = Field(description="the receiver's HTTP status, if one came")
    duration_ms: int | None = Field(description="milliseconds until that status came")
    error: str | None = Field(
        description="why no status came: the destination was refused, or no connection"
    )
    created_at: datetime
    delivered_at: datetime | None
