"""Worker settings from the environment, and Celery sending over TCP and unix-socket Redis."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from worker_helpers import PrivateRedis, attempt_order, mlp_spec

from workers.contract.protocol import RUN_ATTEMPT_TASK, AttemptOrder, node_queue
from workers.node.celery_app import celery_broker_url, make_celery
from workers.node.settings import WorkerSettings


def test_settings_come_from_trainboard_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINBOARD_NODE_NAME", "gpu-7")
    monkeypatch.setenv("TRAINBOARD_CPU_SLOTS", "3")
    monkeypatch.setenv("TRAINBOARD_DATA_DIR", "/srv/tb")
    settings = WorkerSettings()
    assert (settings.node_name, settings.cpu_slots, settings.slots) == ("gpu-7", 3, 3)
    assert settings.data_dir == Path("/srv/tb")
    assert WorkerSettings(cpu_slots=None).slots == os.cpu_count()
    with pytest.raises(ValueError):
        WorkerSettings(sample_interval=0.01)


def test_unix_urls_become_celery_socket_urls() -> None:
    assert celery_broker_url("unix:///run/r.sock") == "redis+socket:///run/r.sock"
    assert celery_broker_url("redis://h:6379/2") == "redis://h:6379/2"


@pytest.mark.parametrize("over_socket", [False, True])
def test_an_attempt_order_reaches_the_node_queue(
    over_socket: bool, redis_url: str, private_redis: PrivateRedis
) -> None:
    url = private_redis.url if over_socket else redis_url
    order = attempt_order(mlp_spec(devices=2))
    app = make_celery(url)
    app.send_task(RUN_ATTEMPT_TASK, args=[order.model_dump(mode="json")], queue=node_queue("n1"))

    (raw,) = redis.Redis.from_url(url).lrange("node.n1", 0, -1)
    message = json.loads(raw)
    assert message["headers"]["task"] == RUN_ATTEMPT_TASK
    (args, _, _) = json.loads(base64.b64decode(message["body"]))
    assert AttemptOrder.model_validate(args[0]) == order


def in_fresh_interpreter(script: str, redis_url: str) -> str:
    """What script printed, run by a new Python (nothing of Celery imported yet); its
    output and errors are both returned, for the assertion's message."""
    done = subprocess.run(
        [sys.executable, "-c", script, redis_url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.stdout + done.stderr


#: a fresh interpreter: warm the app, then build and start a worker until it consumes
WARMED_WORKER = """
import sys
from celery.signals import worker_ready
from workers.node.celery_app import make_celery, warm_worker

app = make_celery(sys.argv[1])
warm_worker(app)
before = set(sys.modules)


def consuming(**_):
    new = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in ("celery", "kombu"))
    print("imported after warm-up:", new, flush=True)
    raise SystemExit(0)


worker_ready.connect(consuming, weak=False)
worker = app.Worker(queues=["tb-warm-test"], pool="threads", concurrency=1, quiet=True,
    redirect_stdouts=False, without_heartbeat=True, without_mingle=True, without_gossip=True)
worker.start()
"""


def test_a_warmed_worker_starts_consuming_without_importing(redis_url: str) -> None:
    """What the node agent warms before it registers is all Celery imports to start
    consuming: an order sent once the node is registered does not wait on imports."""
    assert "imported after warm-up: []" in in_fresh_interpreter(WARMED_WORKER, redis_url)


#: a fresh interpreter: warm the app, then send an order through the scheduler's path
WARMED_SENDER = """
import sys
from workers.node.celery_app import direct_queue, make_celery, warm_sender

app = make_celery(sys.argv[1])
warm_sender(app)
before = set(sys.modules)
with app.producer_or_acquire() as producer, producer.batch(max_size=1):
    app.send_task("x", args=[1], queue=direct_queue("tb-warm-test"), producer=producer,
        declare=[])
new = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in ("celery", "kombu"))
print("imported after warm-up:", new, "sent:", app.connection().default_channel.client.llen(
    "tb-warm-test"), flush=True)
"""


def test_a_warmed_sender_sends_without_importing(redis_url: str) -> None:
    """The node pool warms its Celery app when it is built: the first pass's orders are
    sent without importing or resolving Celery's parts on the way."""
    assert "imported after warm-up: [] sent: 1" in in_fresh_interpreter(WARMED_SENDER, redis_url)
