"""REST routes for webhooks: create, list, delete, and a webhook's deliveries."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from backend.auth.deps import (
    ObjectId,
    ReaderDep,
    SessionDep,
    SettingsDep,
    SubmitterDep,
    WebhookCreationDep,
)
from backend.webhooks import service
from backend.webhooks.destination import AllowList
from backend.webhooks.models import Webhook
from backend.webhooks.schemas import DeliveryOut, WebhookCreated, WebhookIn, WebhookOut

router = APIRouter(prefix="/api/webhooks", tags=["webhooks"])


def _out(hook: Webhook) -> WebhookOut:
    return WebhookOut(
        id=hook.id,
        url=hook.url,
        events=list(hook.events),
        all_jobs=hook.all_jobs,
        format=hook.format,
        owner=hook.owner.username,
        created_at=hook.created_at,
    )


@router.post("", status_code=status.HTTP_201_CREATED, response_model=WebhookCreated)
def create_webhook(
    body: WebhookIn, principal: WebhookCreationDep, session: SessionDep, settings: SettingsDep
) -> WebhookCreated:
    """Register a webhook for the caller's jobs (all_jobs: every job, admins only)."""
    allow = AllowList.parse(settings.webhook_allowed_hosts)
    hook = service.create(session, principal=principal, body=body, allow=allow)
    return WebhookCreated(**_out(hook).model_dump(), secret=hook.secret)


@router.get("", response_model=list[WebhookOut])
def list_webhooks(principal: ReaderDep, session: SessionDep) -> list[WebhookOut]:
    """The caller's webhooks (admins: everyone's), without secrets."""
    return [_out(h) for h in service.list_webhooks(session, principal=principal)]


@router.delete("/{webhook_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_webhook(webhook_id: ObjectId, principal: SubmitterDep, session: SessionDep) -> Response:
    """Delete one of the caller's webhooks; 404 for anyone else's."""
    service.delete(session, principal=principal, webhook_id=webhook_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{webhook_id}/deliveries", response_model=list[DeliveryOut])
def list_deliveries(
    webhook_id: ObjectId, principal: ReaderDep, session: SessionDep
) -> list[DeliveryOut]:
    """A webhook's newest deliveries with each one's status and timing, newest first."""
    rows = service.deliveries(session, principal=principal, webhook_id=webhook_id)
    return [DeliveryOut.model_validate(d, from_attributes=True) for d in rows]
