"""Sending deliveries: a signed JSON POST, retried with backoff, every answer recorded."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.background import every
from backend.db import Database, utcnow
from backend.webhooks.models import Webhook, WebhookDelivery
from backend.webhooks.service import enqueue_new_events

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Trainboard-Signature"
EVENT_HEADER = "X-Trainboard-Event"
DELIVERY_HEADER = "X-Trainboard-Delivery"
#: tries before a delivery is given up; waits between them double from the first
MAX_TRIES = 6
FIRST_RETRY_SECONDS = 2.0
MAX_RETRY_SECONDS = 300.0
TIMEOUT_SECONDS = 5.0
RESPONSE_KEPT = 1024
RUN_EVERY_SECONDS = 1.0
BATCH = 20


def sign(secret: str, body: bytes) -> str:
    """The signature header's value: sha256=<hex HMAC-SHA256 of the raw body>."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def retry_delay(tries: int) -> float:
    """Seconds before try number tries + 1."""
    return float(min(MAX_RETRY_SECONDS, FIRST_RETRY_SECONDS * 2 ** max(0, tries - 1)))


def slack_text(payload: dict[str, Any]) -> str:
    """One line a person reads in a Slack channel: which job, what happened."""
    job = payload.get("job") or {}
    step = payload.get("step")
    where = f" at step {step}" if step is not None else ""
    title = f"Trainboard job #{job.get('id')} {job.get('name', '')}".rstrip()
    return f"{title}: {payload.get('event')}{where}: {payload.get('message', '')}"[:3000]


def body_of(delivery: WebhookDelivery, hook: Webhook) -> bytes:
    """The bytes POSTed: the JSON payload, or Slack's {"text": ...} for a slack webhook."""
    content = {"text": slack_text(delivery.payload)} if hook.format == "slack" else delivery.payload
    return json.dumps(content, separators=(",", ":"), sort_keys=True).encode()


def send(delivery: WebhookDelivery, hook: Webhook, client: httpx.Client) -> None:
    """POST one delivery once and record what came back (or why nothing did)."""
    body = body_of(delivery, hook)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Trainboard-Webhook",
        SIGNATURE_HEADER: sign(hook.secret, body),
        EVENT_HEADER: delivery.event,
        DELIVERY_HEADER: str(delivery.id),
    }
    delivery.tries += 1
    try:
        response = client.post(hook.url, content=body, headers=headers)
    except httpx.HTTPError as err:
        delivery.response_status, delivery.response_body = None, None
        delivery.error = f"{type(err).__name__}: {err}"[:RESPONSE_KEPT]
        ok = False
    else:
        delivery.response_status = response.status_code
        delivery.response_body = response.text[:RESPONSE_KEPT]
        delivery.error = None
        ok = 200 <= response.status_code < 300
    if ok:
        delivery.state, delivery.delivered_at = "delivered", utcnow()
    elif delivery.tries >= MAX_TRIES:
        delivery.state = "failed"
    else:
        delivery.next_at = utcnow() + timedelta(seconds=retry_delay(delivery.tries))


def deliver_due(session: Session, client: Callable[[], httpx.Client]) -> int:
    """Send every pending delivery that is due (a batch); how many were tried."""
    due = session.execute(
        select(WebhookDelivery, Webhook)
        .join(Webhook, Webhook.id == WebhookDelivery.webhook_id)
        .where(WebhookDelivery.state == "pending", WebhookDelivery.next_at <= utcnow())
        .order_by(WebhookDelivery.id)
        .limit(BATCH)
        .with_for_update(of=WebhookDelivery, skip_locked=True)
    ).all()
    for delivery, hook in due:
        send(delivery, hook, client())
    return len(due)


def run_webhooks(*, db: Database, stop: threading.Event) -> None:
    """Queue deliveries for new job events and send due ones, every second, until stop."""
    # made at the first delivery: building its TLS context costs ~25 ms of CPU at every
    # start (every API test's), and most deployments have no webhook
    clients: list[httpx.Client] = []

    def client() -> httpx.Client:
        if not clients:  # no redirects: a 3xx to an internal address would pass the allow-list
            clients.append(httpx.Client(timeout=TIMEOUT_SECONDS, follow_redirects=False))
        return clients[0]

    def step() -> None:
        with db.session() as session:
            enqueue_new_events(session)
        with db.session() as session:
            deliver_due(session, client)

    try:
        every(RUN_EVERY_SECONDS, "webhooks", step, stop, log=log, wait_first=True)
    finally:
        for made in clients:
            made.close()
