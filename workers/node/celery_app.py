"""The Celery application shared by the backend (to send tasks) and the node agent."""

from __future__ import annotations

import importlib
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


#: what Celery imports as a worker is built and started (its bootsteps, the consumer, the
#: thread pool, kombu's Redis transport and event loop)
WORKER_MODULES = (
    "celery.apps.worker",
    "celery.worker.autoscale",
    "celery.worker.components",
    "celery.worker.consumer",
    "celery.worker.consumer.delayed_delivery",
    "celery.worker.loops",
    "celery.worker.request",
    "celery.worker.strategy",
    "celery.concurrency.thread",
    "celery.events.receiver",
    "kombu.asynchronous.hub",
    "kombu.mixins",
    "kombu.transport.redis",
)


#: what a first send imports on its way (the connection's host name goes through IDNA)
SENDER_MODULES = (
    "celery.events.dispatcher",
    "encodings.idna",
    "kombu.mixins",
    "kombu.utils.limits",
)


def warm_worker(app: Celery) -> None:
    """Do ahead what building and starting app's worker would do first: import its modules
    and resolve the app's parts (result backend, remote control, queues).

    The node agent calls this before it registers: once registered it is given work, and
    an order sent before its consumer started waits in Redis (the first job after a start
    waited 80-360 ms for those imports; docs/benchmarks.md, "Submit → running latency").
    """
    for name in WORKER_MODULES:
        importlib.import_module(name)
    _ = app.Worker, app.backend, app.control, app.events, app.log, app.amqp.queues


def warm_sender(app: Celery) -> None:
    """Do ahead what app's first `send_task` would do first: resolve its parts (the AMQP
    layer, result backend, producer pool and with it kombu's Redis transport). Connects to
    nothing: the scheduler's first order after a start would wait on it (34 ms idle)."""
    for name in SENDER_MODULES:
        importlib.import_module(name)
    _ = app.amqp, app.amqp.router, app.backend, app.events, app.producer_pool


def direct_queue(name: str) -> Queue:
    """A queue reached through the anonymous exchange: routed by name alone.

    Publishing to it needs no broker-side binding, so a task still reaches its node
    after Redis lost every key (a restart without persistence, FLUSHALL).
    """
    return Queue(name, Exchange(""), routing_key=name)
