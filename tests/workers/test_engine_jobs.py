"""Engine jobs through the supervisor: a pipelined gpt succeeds; divergence and fp16 on CPU
fail the attempt with a reason the user can read."""

from __future__ import annotations

import pytest
from worker_helpers import attempt_order, mlp_spec, read_items

from workers.contract.protocol import METRICS_STREAM
from workers.contract.spec import JobSpec
from workers.supervisor.attempt import Supervisor
from workers.supervisor.settings import SupervisorSettings

pytestmark = pytest.mark.slow  # starts real rank processes


def test_pipelined_gpt_in_bf16_succeeds_with_loss_from_the_last_stage_only(
    supervisor_settings: SupervisorSettings, redis_url: str
) -> None:
    spec = JobSpec.model_validate(
        {
            "name": "gpt-pipeline",
            "template": "gpt",
            "parallelism": {"strategy": "model", "devices": 2, "microbatches": 4},
            "hyperparameters": {
                "steps": 12,
                "batch_size": 8,
                "n_layer": 2,
                "n_head": 2,
                "n_embd": 32,
                "block_size": 32,
            },
            "precision": "bf16",
        }
    )
    outcome = Supervisor(attempt_order(spec), supervisor_settings).run()

    assert outcome.outcome == "succeeded", outcome.reason
    assert outcome.last_checkpoint is not None and outcome.last_checkpoint.endswith("step-12")
    points = read_items(redis_url, METRICS_STREAM)
    assert {p["rank"] for p in points if p["name"] == "loss"} == {1}  # the last stage
    assert {p["rank"] for p in points if p["name"] == "tokens_per_s"} == {0, 1}
    loss = {p["step"]: p["value"] for p in points if p["name"] == "loss" and p["rank"] == 1}
    assert sorted(loss) == list(range(1, 13)) and loss[12] < loss[1]


def test_a_diverging_job_fails_with_reason_diverged(
    supervisor_settings: SupervisorSettings,
) -> None:
    spec = mlp_spec(hyperparameters={"steps": 30, "lr": 10.0, "optimizer": "sgd"})
    outcome = Supervisor(attempt_order(spec), supervisor_settings).run()

    assert outcome.outcome == "failed"
    assert outcome.reason is not None and outcome.reason.startswith("diverged: "), outcome.reason


def test_fp16_on_cpu_slots_fails_the_attempt_saying_it_needs_a_gpu(
    supervisor_settings: SupervisorSettings,
) -> None:
    outcome = Supervisor(attempt_order(mlp_spec(precision="fp16")), supervisor_settings).run()

    assert outcome.outcome == "failed"
    assert outcome.reason is not None and outcome.reason.startswith("precision fp16 needs a CUDA")
