"""Template `gpt`: a small character-level transformer trained on the standard library's docs."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from workers.rank.engine.templates import Task
from workers.rank.engine.templates.corpus import text


class Embed(nn.Module):
    """Token plus learned position embeddings."""

    def __init__(self, vocab: int, n_embd: int, block_size: int, dropout: float) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, n_embd)
        self.positions = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.drop(self.tokens(idx) + self.positions(pos))


class Block(nn.Module):
    """Pre-norm causal self-attention and MLP, each with a residual connection."""

    def __init__(self, n_embd: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.n_head, self.dropout = n_head, dropout
        self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd)
        )
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        attn = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0
        )
        x = x + self.drop(self.proj(attn.transpose(1, 2).reshape(b, t, c)))
        return x + self.drop(self.mlp(self.ln2(x)))


class Head(nn.Module):
    """Final layer norm and the next-character logits (not tied to the embedding: they may
    live on different pipeline stages)."""

    def __init__(self, n_embd: int, vocab: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(n_embd)
        self.out = nn.Linear(n_embd, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.ln(x))


class TokenLoss(nn.Module):
    """Mean cross-entropy over every position of every sequence."""

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def make_model(
    vocab: int, *, n_layer: int, n_head: int, n_embd: int, block_size: int, dropout: float
) -> nn.Sequential:
    """`n_layer` pipeline-splittable units: the first holds the embeddings, the last the head."""
    blocks: list[nn.Module] = [Block(n_embd, n_head, dropout) for _ in range(n_layer)]
    blocks[0] = nn.Sequential(Embed(vocab, n_embd, block_size, dropout), blocks[0])
    blocks[-1] = nn.Sequential(blocks[-1], Head(n_embd, vocab))
    return nn.Sequential(*blocks)


def encode(corpus: str) -> tuple[torch.Tensor, list[str]]:
    """The corpus as character ids, and the vocabulary (sorted characters)."""
    vocab = sorted(set(corpus))
    index = {ch: i for i, ch in enumerate(vocab)}
    return torch.tensor([index[ch] for ch in corpus], dtype=torch.long), vocab


def build(hp: dict[str, Any]) -> Task:
    """The gpt task: every window of block_size characters predicts the next characters."""
    torch.manual_seed(hp["seed"])
    ids, vocab = encode(text())
    size = hp["block_size"]
    model = make_model(
        len(vocab),
        n_layer=hp["n_layer"],
        n_head=hp["n_head"],
        n_embd=hp["n_embd"],
        block_size=size,
        dropout=hp["dropout"],
    )
    # views, not copies: a batch gathers only its own windows
    inputs = ids[:-1].unfold(0, size, 1)
    targets = ids[1:].unfold(0, size, 1)
    return Task(model, inputs, targets, TokenLoss(), tokens_per_sample=size)
