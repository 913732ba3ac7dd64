"""Worker settings from the environment, and Celery sending over TCP and unix-socket Redis."""

from __future__ import annotations

import base64
import json
import os
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
