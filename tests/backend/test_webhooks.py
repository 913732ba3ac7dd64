"""Webhooks: signed JSON POSTs on job events to a real local receiver, retried after a 500."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.auth.models import User
from backend.config import Settings
from backend.db import Database
from backend.jobs.models import Job, JobEvent
from backend.webhooks.delivery import COULD_NOT_CONNECT, Poster, WebhooksPass, deliver_due
from backend.webhooks.destination import AllowList
from backend.webhooks.models import Webhook, WebhookCursor, WebhookDelivery
from backend.webhooks.service import enqueue_new_events
from tests.backend.conftest import bearer
from tests.backend.test_jobs_api import GOOD_SPEC
from tests.health.receiver import Receiver
from tests.workers.worker_helpers import wait_for


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The API tests' settings, letting webhooks reach the local receivers (loopback)."""
    return settings.model_copy(update={"webhook_allowed_hosts": "*,127.0.0.1"})


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A webhook receiver that answers 500 once, then 200."""
    server = Receiver(fail=1)
    server.start()
    yield server
    server.server.shutdown()


def _event(database: Database, job_id: int, kind: str, message: str) -> None:
    with database.session() as session:
        session.add(JobEvent(job_id=job_id, kind=kind, message=message))


# the app's delivery loop on real timers: a 1 s poll, a 2 s first retry
@pytest.mark.slow
def test_each_event_type_is_delivered_signed_and_a_500_is_redelivered(
    api: TestClient, tokens: dict[str, str], database: Database, receiver: Receiver
) -> None:
    alice = bearer(tokens["alice"])
    created = api.post("/api/webhooks", json={"url": receiver.url}, headers=alice)
    assert created.status_code == 201, created.text
    hook = created.json()
    secret = hook["secret"]
    job_id = api.post("/api/jobs", json=GOOD_SPEC, headers=alice).json()["id"]

    wait_for(lambda: _cursor(database), timeout=10, what="the webhook loop to start")
    _event(database, job_id, "hung", "hung: no progress for 5 s (hang_timeout): rank 1 ...")
    _event(database, job_id, "straggler", "rank 1 on node n1 device 1 is a straggler: ...")
    _event(database, job_id, "failed", "diverged: loss is NaN/Inf at step 13")
    _event(database, job_id, "failed", "rank 1 exited with 1")
    _event(database, job_id, "preempted", "preempted by job 9 (priority high)")
    _event(database, job_id, "oom_remediation", "out of memory: restarting ... micro-batch 16")
    _event(database, job_id, "succeeded", "succeeded")
    _event(database, job_id, "running", "running")  # not a webhook event

    expected = ["hung", "straggler", "nan_stop", "failed", "preempted", "oom_remediation"]
    expected.append("succeeded")
    wait_for(lambda: len(receiver.received) >= 8, timeout=30, what="eight POSTs (one retried)")
    for post in receiver.received:
        signature = hmac.new(secret.encode(), post["body"], hashlib.sha256).hexdigest()
        assert post["headers"]["X-Trainboard-Signature"] == f"sha256={signature}"
    bodies = [json.loads(post["body"]) for post in receiver.received]
    # the first answered 500; its redelivery comes after the backoff, behind the others
    assert [b["event"] for b in bodies] == [*expected, "hung"]
    assert bodies[0] == bodies[-1] and bodies[0]["job"]["id"] == job_id
    assert bodies[2]["message"].startswith("diverged:") and bodies[0]["job"]["name"] == "mlp-dp"
    first, retry = receiver.received[0]["headers"], receiver.received[-1]["headers"]
    assert first["X-Trainboard-Delivery"] == retry["X-Trainboard-Delivery"]

    def delivered() -> list[dict[str, Any]]:
        url = f"/api/webhooks/{hook['id']}/deliveries"
        rows: list[dict[str, Any]] = api.get(url, headers=alice).json()
        return rows if all(d["state"] == "delivered" for d in rows) else []

    deliveries = wait_for(delivered, timeout=10, what="every delivery recorded as delivered")
    assert [d["event"] for d in reversed(deliveries)] == expected
    assert all(d["response_status"] == 200 and d["duration_ms"] >= 0 for d in deliveries)
    assert all("response_body" not in d for d in deliveries)  # the answer's body is not kept
    assert {d["event"]: d["tries"] for d in deliveries}["hung"] == 2


@pytest.mark.slow  # the app's delivery loop on its real 1 s poll
def test_a_slack_webhook_gets_a_signed_text_body(
    api: TestClient, tokens: dict[str, str], database: Database
) -> None:
    receiver = Receiver()
    receiver.start()
    alice = bearer(tokens["alice"])
    body = {"url": receiver.url, "format": "slack", "events": ["oom_remediation"]}
    hook = api.post("/api/webhooks", json=body, headers=alice).json()
    assert hook["format"] == "slack"
    assert (
        api.post("/api/webhooks", json={**body, "format": "xml"}, headers=alice).status_code == 422
    )
    job_id = api.post("/api/jobs", json=GOOD_SPEC, headers=alice).json()["id"]
    wait_for(lambda: _cursor(database), timeout=10, what="the webhook loop to start")
    _event(database, job_id, "oom_remediation", "out of memory: restarting with micro-batch 16")
    wait_for(lambda: receiver.received, timeout=30, what="the slack POST")
    [post] = receiver.received
    receiver.server.shutdown()
    signature = hmac.new(hook["secret"].encode(), post["body"], hashlib.sha256).hexdigest()
    assert post["headers"]["X-Trainboard-Signature"] == f"sha256={signature}"
    assert json.loads(post["body"]) == {
        "text": f"Trainboard job #{job_id} mlp-dp: oom_remediation: "
        "out of memory: restarting with micro-batch 16"
    }


def _owner_and_job(session: Session) -> tuple[int, int]:
    """A user and a job of theirs, written: their ids."""
    user = User(username="bob", role="user")
    session.add(user)
    session.flush()
    job = Job(name="j", owner_id=user.id, spec={}, devices_requested=1)
    session.add(job)
    session.flush()
    return user.id, job.id


def _cursor(database: Database) -> bool:
    with database.session() as session:
        return session.scalar(select(WebhookCursor)) is not None


def test_urls_are_http_only_and_webhooks_are_private(
    api: TestClient, tokens: dict[str, str]
) -> None:
    alice, admin = bearer(tokens["alice"]), bearer(tokens["admin"])
    for url in ("file:///etc/passwd", "gopher://x/", "ftp://h/x", "http://", "http://u:p@h/"):
        assert api.post("/api/webhooks", json={"url": url}, headers=alice).status_code == 422
    all_jobs = {"url": "https://hooks.example.com/x", "all_jobs": True}
    assert api.post("/api/webhooks", json=all_jobs, headers=alice).status_code == 422
    admins = api.post("/api/webhooks", json=all_jobs, headers=admin)
    assert admins.status_code == 201 and admins.json()["all_jobs"] is True
    hook_id = admins.json()["id"]

    assert api.get("/api/webhooks", headers=alice).json() == []
    assert "secret" not in api.get("/api/webhooks", headers=admin).json()[0]
    assert api.delete(f"/api/webhooks/{hook_id}", headers=alice).status_code == 404
    assert api.get(f"/api/webhooks/{hook_id}/deliveries", headers=alice).status_code == 404
    assert api.delete(f"/api/webhooks/{hook_id}", headers=admin).status_code == 204
    assert api.get("/api/webhooks", headers=admin).json() == []


def test_on_postgresql_events_become_deliveries_once_and_a_dead_receiver_is_retried(
    migrated_postgres_url: str, receiver: Receiver
) -> None:
    database = Database(migrated_postgres_url)
    with database.session() as session:
        owner, job_id = _owner_and_job(session)
        session.add(Webhook(owner_id=owner, url=receiver.url, secret="s", events=["failed"]))
        assert enqueue_new_events(session) == 0  # the cursor starts at the newest event
        session.add(JobEvent(job_id=job_id, kind="failed", message="rank 0 exited with 1"))
    with database.session() as session:
        assert enqueue_new_events(session) == 1
        assert enqueue_new_events(session) == 0
    poster = Poster(AllowList.parse("127.0.0.1"))
    receiver.server.shutdown()
    receiver.server.server_close()  # nothing listens: the try is recorded, retried later
    with database.session() as session:
        assert deliver_due(session, lambda: poster) == 1
    with database.session() as session:
        [row] = session.scalars(select(WebhookDelivery)).all()
        assert (row.state, row.tries, row.response_status) == ("pending", 1, None)
        assert row.error == COULD_NOT_CONNECT
        assert deliver_due(session, lambda: poster) == 0  # not due before its backoff
    poster.close()
    database.dispose()


def test_a_pass_without_webhooks_only_moves_the_cursor_and_tells_the_loop_it_may_sleep(
    database: Database, receiver: Receiver
) -> None:
    """With no webhook the loop sleeps until a job changes (or 30 s): its pass says so, and
    the events it looked past are not sent to a webhook registered after it."""
    with database.session() as session:
        owner, job_id = _owner_and_job(session)
    look = WebhooksPass(database, AllowList.parse("127.0.0.1"))
    assert look() is False  # the first pass: the cursor starts at the newest event
    _event(database, job_id, "failed", "rank 0 exited with 1")
    assert look() is False
    with database.session() as session:
        assert session.scalars(select(WebhookDelivery)).all() == []
        session.add(Webhook(owner_id=owner, url=receiver.url, secret="s", events=["failed"]))
    assert look() is True  # a webhook now: the loop looks every second again
    assert receiver.received == []  # the event before it was looked past
    _event(database, job_id, "failed", "rank 1 exited with 1")
    assert look() is True
    [post] = receiver.received  # the 500 the receiver answers first: retried later
    assert json.loads(post["body"])["message"] == "rank 1 exited with 1"
    look.close()
