"""The supervisor runs real 2-rank mlp attempts: success, cancel with no orphans, and resume."""

from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path

import psutil
import pytest
import redis
import torch
from worker_helpers import attempt_order, mlp_spec, read_items, wait_for

from workers.contract.protocol import (
    EVENTS_STREAM,
    LOGS_STREAM,
    METRICS_STREAM,
    AttemptOrder,
    AttemptOutcome,
    control_key,
)
from workers.contract.run_layout import checkpoint_root, log_dir
from workers.contract.spec import JobSpec
from workers.devices.registry import DeviceRegistry
from workers.rank.engine import checkpoint
from workers.rank.engine.optim import build_optimizer
from workers.rank.engine.templates import build_task
from workers.supervisor.attempt import Supervisor
from workers.supervisor.settings import SupervisorSettings

pytestmark = pytest.mark.slow  # starts real rank processes

#: every step: loss, rate, and the step time split into data wait, forward+backward, optimizer
METRIC_NAMES = {"loss", "lr", "samples_per_s", "step_time"}
METRIC_NAMES |= {"data_time", "compute_time", "optim_time"}
METRIC_NAMES |= {"bytes_sent", "bytes_received"}  # DDP's all-reduce, counted by its hook (#35)


def group_members(pgid: int) -> list[psutil.Process]:
    """Live processes of a process group."""
    alive = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return alive


def run(order: AttemptOrder, settings: SupervisorSettings, **kwargs: object) -> AttemptOutcome:
    return Supervisor(order, settings, **kwargs).run()  # type: ignore[arg-type]


def final_weights(path: Path, spec: JobSpec) -> dict[str, torch.Tensor]:
    task = build_task("mlp", spec.hyperparameters)
    optimizer = build_optimizer(task.model.parameters(), name="adamw", lr=0.1, weight_decay=0)
    checkpoint.load(path, model=task.model, optimizer=optimizer)
    return task.model.state_dict()


def test_two_rank_attempt_succeeds_and_publishes_every_point_once(
    supervisor_settings: SupervisorSettings, redis_url: str
) -> None:
    spec = mlp_spec(devices=2, hyperparameters={"steps": 40, "lr": 0.02})
    order = attempt_order(spec)
    registry = DeviceRegistry()

    outcome = run(order, supervisor_settings, registry=registry)

    assert outcome.outcome == "succeeded", outcome.reason
    assert outcome.exit_codes == [0, 0]
    assert outcome.last_checkpoint is not None and outcome.last_checkpoint.endswith("step-40")
    points = read_items(redis_url, METRICS_STREAM)
    counts = Counter((p["rank"], p["step"], p["name"]) for p in points)
    expected = {(r, s, n) for r in (0, 1) for s in range(1, 41) for n in METRIC_NAMES}
    expected |= {(r, s, "grad_norm") for r in (0, 1) for s in (10, 20, 30, 40)}  # no grad_clip
    assert set(counts) - {(r, s, "peak_mem") for r, s, _ in counts} == expected
    assert set(counts.values()) == {1}
    assert {(0, 40, "peak_mem"), (1, 40, "peak_mem")} <= set(counts)  # once per report
    assert {p["attempt_id"] for p in points} == {order.attempt_id}
    loss = {p["step"]: p["value"] for p in points if p["name"] == "loss" and p["rank"] == 0}
    assert sum(loss[s] for s in range(36, 41)) < 0.8 * sum(loss[s] for s in range(1, 6))

    lines = [item["line"] for item in read_items(redis_url, LOGS_STREAM) if item["rank"] == 0]
    assert "step 40/40 loss" in "\n".join(lines)
    assert any(line.startswith("finished at step 40/40") for line in lines)
    logs = log_dir(supervisor_settings.data_dir, job_id=1, number=1)
    assert "finished at step 40/40" in (logs / "rank-0.stdout.log").read_text()
    # every rank writes its log, not only rank 0
    rank1 = [item["line"] for item in read_items(redis_url, LOGS_STREAM) if item["rank"] == 1]
    assert any(line.startswith("rank 1 step 40/40 local loss") for line in rank1)
    assert "rank 1 finished at step 40/40" in (logs / "rank-1.stdout.log").read_text()
    events = [e for e in read_items(redis_url, EVENTS_STREAM) if "startup:" not in e["kind"]]
    # rank 0 says what it runs (world size, global batch...) at start, then checkpoints
    assert [(e["kind"], e["step"]) for e in events] == [("started", 0), ("checkpoint", 40)]
    assert registry.snapshot() == {}
    # as root the ranks ran as the job's own unprivileged uid: it owns what they wrote
    owner = supervisor_settings.isolation.identity(
        order.job_id, deployment=order.deployment, data_dir=supervisor_settings.data_dir
    ).uid
    if owner is not None:
        written = Path(outcome.last_checkpoint)
        assert {written.stat().st_uid, written.parents[1].stat().st_uid} == {owner}
        assert owner not in (0, os.getuid())


def test_a_failing_rank_fails_the_attempt_with_its_error_and_kills_the_other(
    supervisor_settings: SupervisorSettings,
) -> None:
    spec = mlp_spec(devices=2)
    # a checkpoint of this job's own that is not there: the ranks fail loading it (another
    # job's path, or one outside the run root, the supervisor refuses before any rank runs)
    missing = checkpoint_root(supervisor_settings.data_dir, 1) / "step-7"
    order = attempt_order(spec, resume_from=str(missing))

    outcome = run(order, supervisor_settings)

    assert outcome.outcome == "failed"
    assert outcome.reason is not None and outcome.reason.startswith("rank ")
    assert "last stderr lines" in outcome.reason and "Error" in outcome.reason


def test_cancel_leaves_no_rank_alive_saves_a_checkpoint_and_resume_continues_there(
    supervisor_settings: SupervisorSettings, redis_url: str
) -> None:
    spec = mlp_spec(devices=2, hyperparameters={"steps": 400})
    first = attempt_order(spec, job_id=1, number=1)
    supervisor = Supervisor(first, supervisor_settings)
    outcomes: list[AttemptOutcome] = []
    thread = threading.Thread(target=lambda: outcomes.append(supervisor.run()))
    thread.start()
    wait_for(lambda: read_items(redis_url, METRICS_STREAM), what="the first metric points")
    pids = [p.pid for p in supervisor.processes]
    pgid = os.getpgid(pids[0])
    redis.Redis.from_url(redis_url).set(control_key(first.attempt_id), "cancel")
    thread.join(timeout=60)

    (stopped,) = outcomes
    assert stopped.outcome == "stopped" and stopped.exit_codes == [0, 0]
    assert not group_members(pgid) and not any(psutil.pid_exists(p) for p in pids)
    assert stopped.last_checkpoint is not None
    saved_at = int(Path(stopped.last_checkpoint).name.removeprefix("step-"))
    assert 10 <= saved_at < 400

    second = attempt_order(spec, job_id=1, number=2, resume_from=stopped.last_checkpoint)
    resumed = run(second, supervisor_settings)
    assert resumed.outcome == "succeeded", resumed.reason
    steps = {
        p["step"]
        for p in read_items(redis_url, METRICS_STREAM)
        if p["attempt_id"] == second.attempt_id
    }
    assert steps == set(range(saved_at + 1, 401))

    uninterrupted = run(attempt_order(spec, job_id=2), supervisor_settings)
    assert uninterrupted.outcome == "succeeded"
    assert resumed.last_checkpoint and uninterrupted.last_checkpoint
    after_resume = final_weights(Path(resumed.last_checkpoint), spec)
    straight = final_weights(Path(uninterrupted.last_checkpoint), spec)
    for name, expected in straight.items():  # same data order, optimizer state and schedule
        torch.testing.assert_close(after_resume[name], expected, rtol=1e-5, atol=1e-6)
