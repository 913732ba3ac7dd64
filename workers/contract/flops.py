"""Training FLOPs per sample of each template, for MFU (PaLM appendix B / nanoGPT's estimate).

A matmul with N weights costs 2N FLOPs a sample forward and 4N backward: 6N per use. The
mlp uses each weight once a sample; the cnn once per pixel of each conv; the gpt once per
token, plus attention's 12 x n_layer x n_embd x block_size per token (nanoGPT's
`estimate_mfu`). Lookups (the gpt's embeddings), norms and activations are not counted.
"""

from __future__ import annotations

from typing import Any

from workers.contract.memory_estimate import CNN_CLASSES, GPT_VOCAB, parameter_count


def flops_per_sample(template: str, hp: dict[str, Any]) -> float:
    """Forward plus backward FLOPs of one training sample of the template's model."""
    if template == "mlp":
        return 6.0 * parameter_count(template, hp)
    if template == "cnn":
        c, side = hp["channels"], hp["image_size"]
        conv_weights = 9 * c * (1 + c * (hp["blocks"] - 1))
        return 6.0 * (conv_weights * side * side + c * CNN_CLASSES)
    if template == "gpt":
        e, tokens, layers = hp["n_embd"], hp["block_size"], hp["n_layer"]
        matmul_weights = parameter_count(template, hp) - GPT_VOCAB * e - tokens * e
        return (6.0 * matmul_weights + 12.0 * layers * e * tokens) * tokens
    raise ValueError(f"unknown template {template!r}")
