"""Update modes through the real rank entry point and supervisor: traffic and staleness reach
the metrics stream beside the loss, per rank and step (#35)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import redis
import torch
from worker_helpers import attempt_order, mlp_spec, read_items, wait_for

from workers.contract.protocol import METRICS_STREAM, AttemptOutcome, StopRequest, control_key
from workers.contract.spec import JobSpec
from workers.rank.engine import checkpoint
from workers.rank.engine.optim import build_optimizer
from workers.rank.engine.templates import build_task
from workers.supervisor.attempt import Supervisor
from workers.supervisor.settings import SupervisorSettings

pytestmark = pytest.mark.slow  # starts real rank processes

STEPS = 12


def spec(**parallelism: object) -> JobSpec:
    return mlp_spec(
        2,
        hyperparameters={"steps": STEPS},
        parallelism={"devices": 2, **parallelism},
        checkpoint={"every_steps": 6},
    )


def test_async_reports_bytes_per_rank_and_staleness_from_the_server(
    supervisor_settings: SupervisorSettings, redis_url: str
) -> None:
    outcome = Supervisor(attempt_order(spec(update="async")), supervisor_settings).run()

    assert outcome.outcome == "succeeded", outcome.reason
    assert outcome.last_checkpoint is not None and outcome.last_checkpoint.endswith("step-12")
    points = read_items(redis_url, METRICS_STREAM)

    def series(name: str, rank: int) -> dict[int, float]:
        return {p["step"]: p["value"] for p in points if p["name"] == name and p["rank"] == rank}

    for name in ("bytes_sent", "bytes_received", "loss"):  # the job's steps are rank 0's
        assert sorted(series(name, 0)) == list(range(1, STEPS + 1))
    # the worker steps at its own pace: its rows carry the step rank 0 was taking when it
    # answered (two gradients in one of them make one row, bytes added); the last meets
    worker_sent = series("bytes_sent", 1)
    assert set(worker_sent) <= set(range(1, STEPS + 1)) and STEPS in worker_sent
    assert sorted(series("bytes_received", 1)) == sorted(worker_sent)
    gradient = min(worker_sent.values())
    assert gradient > 0 and all(v % gradient == 0 for v in worker_sent.values())
    applied = series("updates_applied", 0)
    assert sum(applied.values()) == sum(worker_sent.values()) / gradient  # each gradient once
    assert set(series("staleness_max", 0)) == set(applied)
    assert series("staleness_max", 1) == {}  # the server reports it, not the workers


def test_sync_parameter_server_job_succeeds_with_the_servers_link_measured(
    supervisor_settings: SupervisorSettings, redis_url: str
) -> None:
    order = attempt_order(spec(reduce="parameter_server"))
    outcome = Supervisor(order, supervisor_settings).run()

    assert outcome.outcome == "succeeded", outcome.reason
    points = read_items(redis_url, METRICS_STREAM)
    received = {p["rank"]: p["value"] for p in points if p["name"] == "bytes_received"}
    sent = {p["rank"]: p["value"] for p in points if p["name"] == "bytes_sent"}
    assert received[0] == sent[1] > 0 and sent[0] == received[1] > 0


def saved_weights(path: str, spec: JobSpec) -> dict[str, torch.Tensor]:
    task = build_task("mlp", spec.hyperparameters)
    optimizer = build_optimizer(task.model.parameters(), name="adamw", lr=0.1, weight_decay=0)
    checkpoint.load(Path(path), model=task.model, optimizer=optimizer)
    return task.model.state_dict()


# each mode meets one of the control plane's three stops (a preemption is a stop like the
# others at the ranks: a final checkpoint, then exit), so every stop is shown in a mode
@pytest.mark.parametrize(
    ("parallelism", "stop"),
    [
        ({"reduce": "parameter_server"}, StopRequest.cancel),
        ({"update": "async"}, StopRequest.preempt),
        ({"update": "local_sgd", "sync_every": 4}, StopRequest.pause),
        ({"reduce": "parameter_server", "server": "dedicated"}, StopRequest.preempt),
        ({"update": "async", "server": "dedicated"}, StopRequest.pause),
    ],
    ids=[
        "sync-parameter-server-cancel",
        "async-preempt",
        "local-sgd-pause",
        "sync-dedicated-server-preempt",
        "async-dedicated-server-pause",
    ],
)
def test_a_stopped_job_saves_and_its_next_attempt_resumes_there(
    parallelism: dict[str, object],
    stop: StopRequest,
    supervisor_settings: SupervisorSettings,
    redis_url: str,
) -> None:
    steps = 300
    # every step takes at least 15 ms (4.5 s for the 300), so the stop lands mid-run: on a
    # quiet machine the tiny model ran all 300 steps before the stop arrived. The slowed rank
    # is one the job's step waits for (a dedicated server trains nothing: a worker there);
    # the delay changes no number.
    slow = {"rank": 1 if parallelism.get("server") == "dedicated" else 0, "delay_ms": 15}
    job = mlp_spec(
        2,
        hyperparameters={"steps": steps},
        parallelism={"devices": 2, **parallelism},
        straggler=slow,
    )
    first = attempt_order(job, job_id=1, number=1)
    supervisor = Supervisor(first, supervisor_settings)
    outcomes: list[AttemptOutcome] = []
    thread = threading.Thread(target=lambda: outcomes.append(supervisor.run()))
    thread.start()
    # start-up (job user, rendezvous, imports) took 33 s here under a load average of 10-15
    wait_for(
        lambda: read_items(redis_url, METRICS_STREAM), timeout=120, what="the first metric points"
    )
    redis.Redis.from_url(redis_url).set(control_key(first.attempt_id), stop.value)
    thread.join(timeout=90)

    (stopped,) = outcomes
    assert stopped.outcome == "stopped" and stopped.exit_codes == [0, 0], stopped.reason
    assert stopped.last_checkpoint is not None
    saved_at = int(Path(stopped.last_checkpoint).name.removeprefix("step-"))
    assert 1 <= saved_at < steps
    second = attempt_order(job, job_id=1, number=2, resume_from=stopped.last_checkpoint)
    resumed = Supervisor(second, supervisor_settings).run()
    assert resumed.outcome == "succeeded", resumed.reason
    points = read_items(redis_url, METRICS_STREAM)
    again = {p["step"] for p in points if p["attempt_id"] == second.attempt_id}
    assert again == set(range(saved_at + 1, steps + 1))
    if parallelism.get("server") == "dedicated":  # the job's loss is the server's (rank 0's)
        losses = {p["step"] for p in points if p["name"] == "loss" and p["rank"] == 0}
        assert set(range(saved_at + 1, steps + 1)) <= losses
    if parallelism.get("reduce") == "parameter_server":  # deterministic: as if never stopped
        straight = Supervisor(attempt_order(job, job_id=2), supervisor_settings).run()
        assert straight.last_checkpoint and resumed.last_checkpoint
        expected = saved_weights(straight.last_checkpoint, job)
        got = saved_weights(resumed.last_checkpoint, job)
        for name, value in expected.items():
            torch.testing.assert_close(got[name], value, rtol=1e-5, atol=1e-6)
