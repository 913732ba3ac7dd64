"""The pre-launch memory estimate against the real template models: counts and measured bytes."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from workers.contract.memory_estimate import GPT_VOCAB, estimate, parameter_count
from workers.contract.spec import JobSpec
from workers.rank.engine.templates import build_task

CASES: list[dict[str, Any]] = [
    {"template": "mlp", "hyperparameters": {"hidden": 96, "layers": 5, "batch_size": 16}},
    {"template": "cnn", "hyperparameters": {"channels": 8, "blocks": 3, "batch_size": 8}},
    {
        "template": "gpt",
        "hyperparameters": {"n_layer": 2, "n_embd": 64, "block_size": 32, "batch_size": 4},
    },
]


def _spec(case: dict[str, Any], **extra: Any) -> JobSpec:
    return JobSpec.model_validate({"name": "estimate", **case, **extra})


def _saved_activation_bytes(model: torch.nn.Module, task: Any, batch: int) -> int:
    """Bytes of the tensors autograd saves for backward in one forward + loss, parameters
    excluded, each storage counted once."""
    params = {p.data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if tensor.data_ptr() not in params and storage.nbytes():
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    x, y = task.inputs[:batch].clone(), task.targets[:batch].clone()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = task.loss_fn(model(x), y)
    loss.backward()
    return sum(storages.values()) - x.nbytes - y.nbytes  # the batch itself is the data's


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["template"])
def test_the_estimate_matches_the_built_model_and_its_measured_sizes(case: dict[str, Any]) -> None:
    spec = _spec(case)
    task = build_task(spec.template or "", spec.hyperparameters)
    model = task.model
    real = sum(p.numel() for p in model.parameters())
    counted = parameter_count(spec.template or "", spec.hyperparameters)
    if spec.template == "gpt":  # the estimate bounds the corpus' vocabulary above
        vocab = model[0][0].tokens.num_embeddings  # type: ignore[index]
        n_embd = spec.hyperparameters["n_embd"]
        assert counted - real == (GPT_VOCAB - vocab) * (2 * n_embd + 1)
    else:
        assert counted == real
    est = estimate(spec, gpu=False)

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = spec.hyperparameters["batch_size"]
    measured_activations = _saved_activation_bytes(model, task, batch)
    optimizer.step()
    param_bytes = sum(p.nbytes for p in model.parameters())
    grad_bytes = sum(p.grad.nbytes for p in model.parameters() if p.grad is not None)
    state_bytes = sum(
        t.nbytes
        for state in optimizer.state.values()
        for k, t in state.items()
        if k != "step"  # AdamW's step counters: one scalar per parameter
    )
    slack = (GPT_VOCAB * spec.hyperparameters.get("n_embd", 0) * 2 + GPT_VOCAB) * 4
    assert param_bytes <= est.parameters <= param_bytes + slack
    assert grad_bytes <= est.gradients <= grad_bytes + slack  # one device: no DDP buckets
    assert state_bytes == 2 * param_bytes  # exp_avg and exp_avg_sq
    assert state_bytes <= est.optimizer_state <= state_bytes + 2 * slack
    # the saved tensors, within 25% (views, dtype casts and small stats aside)
    assert est.activations == pytest.approx(measured_activations, rel=0.25)


def test_bf16_halves_the_activations_and_ddp_adds_a_bucket_copy_of_the_gradients() -> None:
    case = CASES[0]
    fp32 = estimate(_spec(case))
    bf16 = estimate(_spec(case, precision="bf16"))
    assert bf16.parameters == fp32.parameters  # fp32 master weights under autocast
    assert bf16.activations < 0.6 * fp32.activations
    ddp = estimate(_spec(case, parallelism={"devices": 4}))
    assert ddp.gradients == 2 * fp32.gradients
    assert fp32.runtime > 0 and estimate(_spec(case), gpu=False).runtime == 0


@pytest.mark.parametrize(
    ("parallelism", "copies"),
    [
        ({}, 1),  # DDP's bucket copy
        ({"reduce": "parameter_server"}, 2),  # rank 0's flat sum and inbox
        ({"update": "async"}, 2),  # rank 0's inbox and outgoing weights
        ({"update": "async", "max_staleness": 8}, 3),  # and its own gradient set aside
    ],
)
def test_the_update_modes_buffers_on_rank_0_count_in_the_gradients(
    parallelism: dict[str, Any], copies: int
) -> None:
    case = CASES[0]
    one = estimate(_spec(case))
    mode = estimate(_spec(case, parallelism={"devices": 4, **parallelism}))
    assert mode.gradients == (1 + copies) * one.gradients
    assert mode.total == one.total + copies * one.gradients
    assert (copies > 0) == ("gradients include" in mode.note)


def test_local_sgd_counts_the_checkpoints_flat_copy_of_the_optimizer_state() -> None:
    # a tiny batch: activations and gradients weigh less than AdamW's two slots
    case = {"template": "mlp", "hyperparameters": {"batch_size": 1, "hidden": 512}}
    local = estimate(
        _spec(case, parallelism={"devices": 2, "update": "local_sgd", "sync_every": 4})
    )
    assert local.gradients == local.parameters  # no DDP buckets, no server
    assert local.optimizer_state == 2 * local.parameters
    assert local.total == local.parameters + 2 * local.optimizer_state + local.runtime
    assert local.total > local.parameters + local.gradients + local.optimizer_state + (
        local.activations + local.runtime
    )


def test_a_pipeline_stage_holds_its_share_of_the_parameters() -> None:
    hp = {"layers": 4, "batch_size": 16}
    par = {"strategy": "model", "devices": 2, "microbatches": 8}
    one = estimate(_spec({"template": "mlp", "hyperparameters": hp}))
    stage = estimate(_spec({"template": "mlp", "hyperparameters": hp}, parallelism=par))
    assert stage.parameters == one.parameters // 2
    assert stage.note == "1F1B: stage 0 holds 2 micro-batches of 2 samples"


def test_a_script_job_has_no_estimate() -> None:
    spec = JobSpec.model_validate({"name": "s", "entrypoint": {"script": "train.py"}})
    with pytest.raises(ValueError, match="template job"):
        estimate(spec)


@pytest.mark.parametrize(
    "parallelism",
    [
        {"reduce": "parameter_server"},
        {"update": "async"},
        {"update": "async", "max_staleness": 8},  # a server that trains keeps no gradient aside
    ],
)
def test_a_dedicated_server_is_counted_without_activations(parallelism: dict[str, Any]) -> None:
    case = CASES[0]
    one = estimate(_spec(case))
    par = {"devices": 3, "server": "dedicated", **parallelism}
    dedicated = estimate(_spec(case, parallelism=par))
    # the busiest rank is a worker: its flat gradient out and the weights in, and its batch
    assert dedicated.gradients == 3 * one.gradients
    assert dedicated.activations == one.activations
    assert dedicated.server == dedicated.total - dedicated.activations
    assert dedicated.server == (
        dedicated.parameters + dedicated.gradients + dedicated.optimizer_state + one.runtime
    )
    shared = estimate(_spec(case, parallelism={"devices": 3, **parallelism}))
    assert shared.server is None and estimate(_spec(case)).server is None
