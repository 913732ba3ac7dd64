"""The Celery application shared by the backend (to send tasks) and the node agent."""

from __future__ import annotations

from urllib.parse import urlsplit

from celery import Celery
from kombu import Exchange, Queue


def celery_broker_url(redis_url: str) -> str:
    """Turn a redis-py URL into Celery's form (``unix://`` becomes ``redis+socket://``)."""
    parts = urlsplit(redis_url)
    if parts.scheme == "unix":
        query = f"?{parts.query}" if parts.query else ""
        return f"redis+socket://{parts.path}{query}"
    return redis_url


def make_celery(redis_url: str) -> Celery:
    """A Celery app on the given Redis, configured for Trainboard's early-ack tasks."""
    broker = celery_broker_url(redis_url)
    app = Celery("trainboard", broker=broker, backend=None)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        # early ack on purpose: a lost worker is recovered through heartbeats, never redelivery
        task_acks_late=False,
        task_reject_on_worker_lost=False,
        task_ignore_result=True,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        task_default_queue="trainboard",
    )
    return app


def direct_queue(name: str) -> Queue:
    """A queue reached through the anonymous exchange: routed by name alone.

    Publishing to it needs no broker-side binding, so a task still reaches its node
    after Redis lost every key (a restart without persistence, FLUSHALL).
    """
    return Queue(name, Exchange(""), routing_key=name)
