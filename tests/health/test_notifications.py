"""Notifications on a real stack: a NaN stop, an out-of-memory failure and a success reach a
local receiver as signed webhooks, and a Slack-format webhook gets its text body."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import pytest

from tests.health.receiver import RECEIVER_ENV, Receiver
from tests.stack import RunningStack, trainboard_up, wait_for
from workers.contract.oom import TEST_OOM_VARIABLE

pytestmark = pytest.mark.slow

BASE: dict[str, Any] = {"template": "mlp", "max_restarts": 0}
DIVERGES = {**BASE, "name": "diverges", "hyperparameters": {"steps": 40, "lr": 10.0,
            "optimizer": "sgd"}}  # fmt: skip
RUNS_OUT = {
    **BASE,
    "name": "runs-out",
    "hyperparameters": {"steps": 40},
    "env": {TEST_OOM_VARIABLE: "5:0"},
}  # fmt: skip  (on_oom fail: the default)
SUCCEEDS = {**BASE, "name": "succeeds", "hyperparameters": {"steps": 20}}


def _posts(receiver: Receiver) -> list[tuple[str, dict[str, Any], bytes]]:
    return [
        (p["headers"]["X-Trainboard-Event"], json.loads(p["body"]), p["body"])
        for p in receiver.received
    ]


def test_nan_stop_failure_and_success_are_delivered_signed_and_in_slack_format(
    tmp_path: Path,
) -> None:
    plain, slack = Receiver(), Receiver()
    plain.start()
    slack.start()
    with (
        trainboard_up(tmp_path, cpu_slots=3, extra_env=RECEIVER_ENV) as stack,
        stack.client() as client,
    ):
        hook = client.post("/api/webhooks", json={"url": plain.url}).json()  # every event
        text_hook = {"url": slack.url, "format": "slack", "events": ["nan_stop"]}
        assert client.post("/api/webhooks", json=text_hook).status_code == 201
        ids = {
            spec["name"]: client.post("/api/jobs", json=spec).json()["id"]
            for spec in (DIVERGES, RUNS_OUT, SUCCEEDS)
        }
        wait_for(lambda: len(plain.received) >= 3, timeout=240, what="three webhooks")
        wait_for(lambda: slack.received, timeout=30, what="the slack webhook")
        jobs = {name: _job(stack, job_id) for name, job_id in ids.items()}
    plain.server.shutdown()
    slack.server.shutdown()

    by_job = {body["job"]["id"]: (event, body, raw) for event, body, raw in _posts(plain)}
    assert {by_job[ids[name]][0] for name in ids} == {"nan_stop", "failed", "succeeded"}
    assert by_job[ids["diverges"]][0] == "nan_stop"
    assert by_job[ids["diverges"]][1]["message"].startswith("diverged: ")
    event, body, _ = by_job[ids["runs-out"]]
    assert event == "failed" and jobs["runs-out"]["state"] == "failed"
    assert body["job"]["reason"].startswith("out of memory: host MemoryError at step 5 on rank 0")
    assert by_job[ids["succeeds"]][0] == "succeeded"
    for _, _, raw in by_job.values():
        digest = hmac.new(hook["secret"].encode(), raw, hashlib.sha256).hexdigest()
        assert f"sha256={digest}" in [
            p["headers"]["X-Trainboard-Signature"] for p in plain.received
        ]
    [text] = [json.loads(p["body"]) for p in slack.received]
    assert list(text) == ["text"]
    assert text["text"].startswith(f"Trainboard job #{ids['diverges']} diverges: nan_stop")


def _job(stack: RunningStack, job_id: int) -> dict[str, Any]:
    with stack.client() as client:
        job: dict[str, Any] = client.get(f"/api/jobs/{job_id}").json()
    return job


def test_a_preempted_job_is_delivered_as_preempted(tmp_path: Path) -> None:
    receiver = Receiver()
    receiver.start()
    env = {"TRAINBOARD_MIN_RUN_SECONDS": "0", **RECEIVER_ENV}
    with trainboard_up(tmp_path, cpu_slots=1, extra_env=env) as stack, stack.client() as client:
        hook = {"url": receiver.url, "events": ["preempted"]}
        assert client.post("/api/webhooks", json=hook).status_code == 201
        low = {**BASE, "name": "low", "priority": "low", "hyperparameters": {"steps": 100_000}}
        low_id = client.post("/api/jobs", json=low).json()["id"]
        wait_for(lambda: _job(stack, low_id)["step"] > 0, timeout=120, what="the low job to run")
        urgent = {**SUCCEEDS, "name": "urgent", "priority": "high"}
        urgent_id = client.post("/api/jobs", json=urgent).json()["id"]
        wait_for(lambda: receiver.received, timeout=120, what="the preempted webhook")
        [post] = receiver.received
        body = json.loads(post["body"])
        assert post["headers"]["X-Trainboard-Event"] == "preempted"
        assert body["job"]["id"] == low_id
        assert body["message"].startswith(f"preempted by job {urgent_id} (high priority")
        for job_id in (urgent_id, low_id):
            client.post(f"/api/jobs/{job_id}/cancel")
    receiver.server.shutdown()
