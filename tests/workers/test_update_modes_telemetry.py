"""Update modes through the real rank entry point and supervisor: traffic and staleness reach
the metrics stream beside the loss, per rank and step (#35)."""

from __future__ import annotations

import pytest
from worker_helpers import attempt_order, mlp_spec, read_items

from workers.contract.protocol import METRICS_STREAM
from workers.contract.spec import JobSpec
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

    for rank in (0, 1):
        assert sorted(series("bytes_sent", rank)) == list(range(1, STEPS + 1))
        assert sorted(series("bytes_received", rank)) == list(range(1, STEPS + 1))
        assert sorted(series("loss", rank)) == list(range(1, STEPS + 1))
    # the worker sends one gradient a step and receives weights for it (and at each meeting)
    worker_sent = series("bytes_sent", 1)
    assert len(set(worker_sent.values())) == 1 and worker_sent[1] > 0
    assert all(v >= worker_sent[1] for v in series("bytes_received", 1).values())
    applied = series("updates_applied", 0)
    assert sum(applied.values()) == STEPS  # every worker gradient, once
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
