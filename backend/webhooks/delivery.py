"""Sending deliveries: a signed JSON POST, retried with backoff, each answer's status recorded.

Connections go only to addresses the destination check admitted (`destination.py`), resolved
once per connection; redirects are never followed, and nothing of the answer but its status
is kept, so a webhook cannot be used to read or map what the API host reaches.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

import httpcore
import httpx
from sqlalchemy import bindparam, exists, func, select
from sqlalchemy.orm import Session

from backend.background import every
from backend.db import Database, UtcDateTime, utcnow
from backend.jobs.models import JobEvent
from backend.webhooks.destination import AllowList, DestinationRefused, checked_addresses
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
#: what a delivery that got no HTTP status records, whatever the reason (refused, reset,
#: timed out, not HTTP): one text, so the list tells nothing about the receiver's ports
COULD_NOT_CONNECT = "delivery failed: could not connect"
#: a destination the allow-list refuses at delivery time (decided before any connection)
REFUSED = "delivery refused: the destination is not allowed (TRAINBOARD_WEBHOOK_ALLOWED_HOSTS)"
RUN_EVERY_SECONDS = 1.0
#: the longest the loop sleeps without news while no webhook is registered (a job change
#: wakes it: most forwarded events come with one; docs/health.md "Webhooks")
IDLE_SECONDS = 30.0
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


class GuardedBackend(httpcore.SyncBackend):
    """Opens TCP connections only to the checked addresses of the URL's host."""

    def __init__(self, allow: AllowList) -> None:
        self.allow = allow

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        last: Exception = httpcore.ConnectError("no address")
        for address in checked_addresses(self.allow, host, port):
            try:
                return super().connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as err:
                last = err
        raise last


class Poster:
    """POSTs to webhook URLs through the guarded backend; answers (status, seconds)."""

    def __init__(self, allow: AllowList, timeout: float = TIMEOUT_SECONDS) -> None:
        self.timeout = timeout
        # no proxy from the environment: a proxy would resolve (and reach) what it likes
        self.pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(), network_backend=GuardedBackend(allow)
        )

    def post(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, float]:
        parsed = httpx.URL(url)
        default_port = {"http": 80, "https": 443}[parsed.scheme]
        target = httpcore.URL(
            scheme=parsed.scheme.encode(),
            host=parsed.raw_host,
            port=parsed.port or default_port,
            target=parsed.raw_path,
        )
        timeouts = {k: self.timeout for k in ("connect", "read", "write", "pool")}
        sent: list[tuple[bytes | str, bytes | str]] = [("Host", parsed.netloc), *headers.items()]
        started = time.monotonic()
        # the answer's body is never read: its status is all a delivery keeps
        with self.pool.stream(
            "POST",
            target,
            headers=sent,
            content=body,
            extensions={"timeout": timeouts},
        ) as response:
            return response.status, time.monotonic() - started

    def close(self) -> None:
        self.pool.close()


def send(delivery: WebhookDelivery, hook: Webhook, poster: Poster) -> None:
    """POST one delivery once and record its status and time (or that nothing came back)."""
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
        status, seconds = poster.post(hook.url, body, headers)
    except DestinationRefused as err:
        log.info("webhook %d delivery %d refused: %s", hook.id, delivery.id, err)
        delivery.response_status, delivery.duration_ms = None, None
        delivery.error = REFUSED
        ok = False
    except (
        httpcore.NetworkError,
        httpcore.TimeoutException,
        httpcore.ProtocolError,
        httpcore.UnsupportedProtocol,
        OSError,
    ) as err:
        log.info("webhook %d delivery %d failed: %r", hook.id, delivery.id, err)
        delivery.response_status, delivery.duration_ms = None, None
        delivery.error = COULD_NOT_CONNECT
        ok = False
    else:
        delivery.response_status, delivery.duration_ms = status, round(seconds * 1000)
        delivery.error = None
        ok = 200 <= status < 300
    if ok:
        delivery.state, delivery.delivered_at = "delivered", utcnow()
    elif delivery.tries >= MAX_TRIES:
        delivery.state = "failed"
    else:
        delivery.next_at = utcnow() + timedelta(seconds=retry_delay(delivery.tries))


def deliver_due(session: Session, poster: Callable[[], Poster]) -> int:
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
        send(delivery, hook, poster())
    return len(due)


#: what a pass could find to do, in one query: the newest job event, whether a pending
#: delivery is due, and whether any webhook is registered; built once (building the pass's
#: ORM statements costs more than running them, every second, on an idle control plane:
#: docs/benchmarks.md, "An idle trainboard up")
NEWS = select(
    select(func.max(JobEvent.id)).scalar_subquery(),
    exists().where(
        WebhookDelivery.state == "pending",
        WebhookDelivery.next_at <= bindparam("now", type_=UtcDateTime()),
    ),
    exists().where(Webhook.id.is_not(None)),
)


class WebhooksPass:
    """One pass of the webhooks loop: queue deliveries for new job events, send the due ones.

    Calling it answers whether any webhook is registered: with none, the loop may sleep
    until news (nothing can be sent; the pass only moved the event cursor on).
    """

    def __init__(self, db: Database, allow: AllowList) -> None:
        self.db, self.allow = db, allow
        #: made at the first delivery: building its TLS context costs ~25 ms of CPU at every
        #: start (every API test's), and most deployments have no webhook
        self.poster: Poster | None = None
        #: the newest job event the last full pass looked past
        self.seen: list[int | None] = []

    def __call__(self) -> bool:
        with self.db.session() as session:
            found = session.execute(NEWS, {"now": utcnow()}).one()
        newest, due, hooked = found[0], bool(found[1]), bool(found[2])
        if self.seen == [newest] and not due:
            return hooked  # no new event, no delivery due: nothing to queue or send
        with self.db.session() as session:
            enqueue_new_events(session)  # with no webhook: the cursor moves past the events
        self.seen[:] = [newest]
        with self.db.session() as session:
            deliver_due(session, self._poster)
        return hooked

    def _poster(self) -> Poster:
        if self.poster is None:
            self.poster = Poster(self.allow)
        return self.poster

    def close(self) -> None:
        if self.poster is not None:
            self.poster.close()


def run_webhooks(
    *,
    db: Database,
    stop: threading.Event,
    allow: AllowList,
    news: threading.Event | None = None,
) -> None:
    """Queue deliveries for new job events and send due ones, every second, until stop.

    While no webhook is registered there is nothing to send: the loop then waits for `news`
    (a job changed) or IDLE_SECONDS between passes, which only move the event cursor on.
    """
    step = WebhooksPass(db, allow)
    try:
        every(
            RUN_EVERY_SECONDS,
            "webhooks",
            step,
            stop,
            log=log,
            wait_first=True,
            news=news,
            idle_seconds=IDLE_SECONDS,
        )
    finally:
        step.close()
