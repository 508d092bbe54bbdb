"""A small GPT (nanoGPT's shape) whose blocks use activation checkpointing.

Checkpointing makes Thunder recompute the blocks' activations in the backward
pass, so the backward-recompute renaming (``bw_`` names) really runs.

    >>> import torch
    >>> model = tiny_gpt(seed=0)
    >>> tokens = torch.zeros((1, 8), dtype=torch.long)
    >>> model(tokens, tokens)[1].shape
    torch.Size([])
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

__all__ = ["GPT", "GPTConfig", "tiny_gpt"]


@dataclasses.dataclass(frozen=True)
class GPTConfig:
    """The model's size; the defaults keep a CPU compile of forward and backward to seconds."""

    vocab_size: int = 64
    block_size: int = 16
    n_layer: int = 1
    n_head: int = 2
    n_embd: int = 32
    checkpoint_blocks: bool = True


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, channels = x.shape
        q, k, v = self.c_attn(x).split(channels, dim=2)
        q, k, v = (t.view(batch, length, self.n_head, channels // self.n_head).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        out: torch.Tensor = self.c_proj(y.transpose(1, 2).contiguous().view(batch, length, channels))
        return out


class Block(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.proj = nn.Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        out: torch.Tensor = x + self.proj(F.gelu(self.fc(self.ln_2(x))))
        return out


class GPT(nn.Module):
    """Token and position embeddings, ``n_layer`` blocks, a tied LM head and the cross-entropy loss."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(idx.shape[1], dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(positions)
        for block in self.blocks:
            if self.config.checkpoint_blocks:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def tiny_gpt(*, seed: int = 0, **overrides: int | bool) -> GPT:
    """A GPT with deterministic weights (``seed``) and the given config overrides."""
    torch.manual_seed(seed)
    return GPT(GPTConfig(**overrides))  # type: ignore[arg-type]
