"""Memory per device of a template job, before launch: parameters, gradients, optimizer state,
activations of the micro-batch (no torch import: the API computes it for the submit form).

Counts follow the templates' modules exactly (workers/rank/engine/templates; the unit test
compares them with the built models). Activations are the tensors autograd saves for the
backward pass, per sample, from the same module structure; the caching allocator, the CUDA
context and fragmentation come on top (`RUNTIME_BYTES` on a GPU).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from workers.contract.spec import JobSpec, Precision, Strategy

#: characters in the gpt template's corpus vocabulary, bounded above (the corpus has ~100)
GPT_VOCAB = 128
CNN_CLASSES = 4
#: a GPU rank's CUDA context, cuBLAS workspace and allocator slack before any tensor
RUNTIME_BYTES = 600 * 2**20
FP32 = 4


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per device (the busiest: pipeline stage 0 holds the most micro-batches).

    `server`: a dedicated server's own bytes (its weights, the applied gradient, its exchange
    buffers and the optimizer state, no activations: it trains no batch); None when no rank
    only serves. Every other figure is a training rank's.
    """

    parameter_count: int
    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    runtime: int
    total: int
    note: str
    server: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _linear(n_in: int, n_out: int) -> int:
    return n_in * n_out + n_out


def parameter_count(template: str, hp: dict[str, Any]) -> int:
    """Parameters of the template's model, as `sum(p.numel() for p in model.parameters())`."""
    if template == "mlp":
        h, layers = hp["hidden"], hp["layers"]
        return (
            _linear(hp["features"], h)
            + (layers - 2) * _linear(h, h)
            + _linear(h, h)
            + _linear(h, hp["classes"])
        )
    if template == "cnn":
        c, blocks = hp["channels"], hp["blocks"]

        def conv(c_in: int) -> int:
            return c_in * c * 9 + c + 2 * c  # conv weight and bias, group norm affine

        return conv(1) + (blocks - 1) * conv(c) + _linear(c, CNN_CLASSES)
    if template == "gpt":
        e, layers = hp["n_embd"], hp["n_layer"]
        block = 4 * e + _linear(e, 3 * e) + _linear(e, e) + _linear(e, 4 * e) + _linear(4 * e, e)
        embed = GPT_VOCAB * e + hp["block_size"] * e
        head = 2 * e + _linear(e, GPT_VOCAB)
        return embed + layers * block + head
    raise ValueError(f"unknown template {template!r}")


def activation_elements(template: str, hp: dict[str, Any]) -> tuple[int, int]:
    """Per sample: (elements saved in the compute dtype, elements saved in fp32).

    mlp: each Linear saves its input, each GELU its input; cnn: per block the conv, group
    norm and GELU inputs (C x H x W each); gpt per token and layer: both layer-norm inputs,
    q, k, v, the attention output, the projection input, the MLP's inputs and its GELU's
    (17 x n_embd); the cross-entropy keeps fp32 log-probabilities of the logits.
    """
    if template == "mlp":
        h = hp["hidden"]
        return hp["features"] + 2 * hp["layers"] * h, hp["classes"]
    if template == "cnn":
        c, side = hp["channels"], hp["image_size"]
        per_pixel = 1 + 2 * c + 3 * c * (hp["blocks"] - 1)
        return per_pixel * side * side + c, CNN_CLASSES
    if template == "gpt":
        e, tokens = hp["n_embd"], hp["block_size"]
        per_token = e + hp["n_layer"] * 17 * e + 2 * e  # embedding out, blocks, head inputs
        return per_token * tokens, GPT_VOCAB * tokens
    raise ValueError(f"unknown template {template!r}")


def estimate(spec: JobSpec, *, gpu: bool = True) -> MemoryEstimate:
    """The memory one device needs for this template spec (ValueError for a script job)."""
    if spec.template is None:
        raise ValueError("a memory estimate needs a template job (a script's model is unknown)")
    hp, par = spec.hyperparameters, spec.parallelism
    count = parameter_count(spec.template, hp)
    stages = par.stages
    # params, gradients and optimizer state are fp32 under autocast; a stage holds its share
    params = count * FP32 // stages
    copies, held_by = _exchange_buffers(spec) if par.strategy is Strategy.data else (0, "")
    grads = params + copies * params
    slots = {"adamw": 2, "sgd": 1}.get(hp["optimizer"], 2)
    optimizer = slots * params
    compute, kept_fp32 = activation_elements(spec.template, hp)
    width = FP32 if spec.precision is Precision.fp32 else 2
    per_sample = (compute * width + kept_fp32 * FP32) // stages
    micro = hp["batch_size"] // par.microbatches
    if stages == 1:
        in_flight = hp["batch_size"]
        note = f"one micro-batch of {micro} samples"
    elif par.schedule == "gpipe":
        in_flight = hp["batch_size"]
        note = f"GPipe holds all {par.microbatches} micro-batches of {micro} samples"
    else:
        held = min(stages, par.microbatches)
        in_flight = held * micro
        note = f"1F1B: stage 0 holds {held} micro-batches of {micro} samples"
    activations = per_sample * in_flight
    runtime = RUNTIME_BYTES if gpu else 0
    total = params + grads + optimizer + activations + runtime
    if par.mode == "local_sgd" and par.devices > 1:
        # a checkpoint averages the optimizer state through one flat copy of it, after the
        # step has freed gradients and activations
        total = max(total, params + 2 * optimizer + runtime)
    if held_by:
        note = f"{note}; gradients include {held_by}"
    # a dedicated server holds as many exchange buffers as a worker (its inbox and the sum or
    # the outgoing weights; a worker's flat gradient out and its weights in) and no batch
    server = params + grads + optimizer + runtime if par.servers else None
    return MemoryEstimate(
        count, params, grads, optimizer, activations, runtime, total, note, server
    )


def _exchange_buffers(spec: JobSpec) -> tuple[int, str]:
    """Gradient-sized buffers the update mode adds on its busiest rank, and what.

    They follow workers/rank/engine/updates.py: DDP's buckets are a copy of the gradients
    (gradient_as_bucket_view off); the parameter server sums into a flat copy of rank 0's
    gradient and receives each worker's into one inbox; async rank 0 receives a worker's
    gradient and sends the weights flat (and with max_staleness keeps its own gradient
    aside while it serves a worker at the bound); local SGD's flat parameters of an
    average exist once the gradients are freed. With a dedicated server rank 0 trains no
    batch, so its own gradient is never set aside, and the busiest rank is a worker, which
    holds as many: its flat gradient sent and the weights received.
    """
    par = spec.parallelism
    if par.devices == 1:
        return 0, ""
    if par.mode == "sync/allreduce":
        return 1, "DDP's bucket copy"
    if par.servers and par.mode in ("sync/parameter_server", "async"):
        return 2, "a worker's flat gradient out and weights in (the server's buffers weigh as much)"
    if par.mode == "sync/parameter_server":
        return 2, "the parameter server's flat sum and inbox on rank 0"
    if par.mode == "async":
        if par.max_staleness is not None:
            return 3, "rank 0's inbox, outgoing weights and own gradient kept aside at the bound"
        return 2, "rank 0's inbox and outgoing weights"
    return 0, ""
