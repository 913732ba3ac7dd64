"""Webhooks: register, list, delete, and turn job events into pending deliveries."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from backend.auth.service import Principal, visible_or_raise
from backend.jobs.models import Job, JobEvent
from backend.webhooks.destination import AllowList, DestinationRefused, resolve
from backend.webhooks.models import Webhook, WebhookCursor, WebhookDelivery
from backend.webhooks.schemas import WebhookIn

#: newest deliveries listed per webhook
LIST_LIMIT = 200
#: job event kinds delivered under their own name ("failed" is failed or nan_stop); a
#: `preempted` job event is written by the scheduler's preemption (issue #14)
FORWARDED = ("succeeded", "preempted", "hung", "straggler", "oom_remediation")


class WebhookNotFound(LookupError):
    """No such webhook, or not the caller's (answered as the same 404)."""


class WebhookRefused(ValueError):
    """A webhook the deployment does not allow (an internal address, or off the allow-list)."""


def check_destination(url: str, allow: AllowList) -> None:
    """WebhookRefused unless url's host resolves only to addresses the allow-list admits.

    A name that does not resolve yet is taken where any public host is (each delivery
    checks again, against the addresses it connects to)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    addresses = resolve(host, parts.port or (443 if parts.scheme == "https" else 80))
    if not addresses and (allow.any_public or host.lower().rstrip(".") in allow.names):
        return
    try:
        allow.check(host, addresses)
    except DestinationRefused as err:
        raise WebhookRefused(str(err)) from None


def create(session: Session, *, principal: Principal, body: WebhookIn, allow: AllowList) -> Webhook:
    """Register a webhook of the caller's (all_jobs: admins only) with a new secret."""
    if body.all_jobs and not principal.is_admin:
        raise WebhookRefused("all_jobs webhooks are for admins only")
    check_destination(body.url, allow)
    hook = Webhook(
        owner_id=principal.user_id,
        all_jobs=body.all_jobs,
        url=body.url,
        secret=secrets.token_hex(32),
        events=list(body.events),
        format=body.format,
    )
    session.add(hook)
    session.flush()
    return hook


def list_webhooks(session: Session, *, principal: Principal) -> Sequence[Webhook]:
    """The caller's webhooks (admins: everyone's)."""
    query = select(Webhook).order_by(Webhook.id)
    if not principal.is_admin:
        query = query.where(Webhook.owner_id == principal.user_id)
    return session.scalars(query).all()


def get(session: Session, *, principal: Principal, webhook_id: int) -> Webhook:
    """One webhook the caller may see, or WebhookNotFound."""
    missing = WebhookNotFound(f"webhook {webhook_id} not found")
    return visible_or_raise(session, Webhook, webhook_id, principal=principal, missing=missing)


def delete(session: Session, *, principal: Principal, webhook_id: int) -> None:
    """Delete a webhook and its deliveries."""
    session.delete(get(session, principal=principal, webhook_id=webhook_id))


def deliveries(
    session: Session, *, principal: Principal, webhook_id: int
) -> Sequence[WebhookDelivery]:
    """A webhook's newest deliveries, newest first."""
    get(session, principal=principal, webhook_id=webhook_id)
    query = (
        select(WebhookDelivery)
        .where(WebhookDelivery.webhook_id == webhook_id)
        .order_by(WebhookDelivery.id.desc())
        .limit(LIST_LIMIT)
    )
    return session.scalars(query).all()


def event_name(event: JobEvent) -> str | None:
    """The webhook event a job event is, if any (a divergence failure is a NaN stop)."""
    if event.kind == "failed":
        return "nan_stop" if event.message.startswith("diverged") else "failed"
    return event.kind if event.kind in FORWARDED else None


def payload(event: JobEvent, job: Job, name: str) -> dict[str, Any]:
    """The JSON body a webhook receives."""
    return {
        "event": name,
        "job": {"id": job.id, "name": job.name, "state": job.state, "reason": job.reason},
        "message": event.message,
        "step": event.step,
        "attempt_id": event.attempt_id,
        "time": event.time.isoformat(),
    }


def enqueue_new_events(session: Session) -> int:
    """Turn job events newer than the cursor into pending deliveries; how many were queued.

    The first run starts at the newest event: history is not replayed to new webhooks.
    """
    cursor = session.scalars(select(WebhookCursor).with_for_update()).first()
    newest = session.scalar(select(func.max(JobEvent.id))) or 0
    if cursor is None:
        session.add(WebhookCursor(id=1, last_event_id=newest))
        return 0
    rows = session.execute(
        select(JobEvent, Job)
        .join(Job, Job.id == JobEvent.job_id)
        .where(JobEvent.id > cursor.last_event_id, JobEvent.id <= newest)
        .where(JobEvent.kind.in_(("failed", *FORWARDED)))
        .order_by(JobEvent.id)
    ).all()
    queued = 0
    for event, job in rows:
        name = event_name(event)
        if name is None:
            continue
        hooks = session.scalars(
            select(Webhook).where(or_(Webhook.owner_id == job.owner_id, Webhook.all_jobs))
        ).all()
        for hook in hooks:
            if name in hook.events:
                session.add(
                    WebhookDelivery(
                        webhook_id=hook.id,
                        job_id=job.id,
                        event=name,
                        payload=payload(event, job, name),
                    )
                )
                queued += 1
    cursor.last_event_id = newest
    return queued
