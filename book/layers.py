"""The position-wise parts of a Transformer block: the feed-forward network and the norms. Chapters 6 and 10.

FeedForward: Linear(C -> F), activation (GELU, ReLU; ReLU² and the gated SwiGLU of Chapter 10), Linear(F -> C).
LayerNorm and RMSNorm: per-position normalisation over the C features, equal to PyTorch's (whose fused kernels
they call; Chapter 6 writes both out). Attention is book.attention.Attention; the blocks made of these parts are
in book.blocks (and the GPT's own in book.gpt).

Shape legend (batch first): B batch, T time, C = d_model, F = d_ff.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checks import one_of, positive_int, positive_number, probability

__all__ = ["relu_squared", "swiglu_hidden", "FeedForward", "LayerNorm", "RMSNorm"]


def relu_squared(x: torch.Tensor) -> torch.Tensor:
    """ReLU(x)^2 (So et al. 2021, Primer; modded-nanoGPT). Chapter 10."""
    return F.relu(x).square()


_ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu, "relu2": relu_squared, "swiglu": F.silu}
GATED = ("swiglu",)   # activations with a gate: up projects to 2 F, silu(gate) * value


def swiglu_hidden(d_model: int, multiple: int = 1) -> int:
    """F for a SwiGLU FFN with the parameters of a 4C one: 3 C F = 8 C^2, so F = 8C/3 (rounded down to
    `multiple`; LLaMA uses 256). Chapter 10."""
    positive_int(d_model=d_model, multiple=multiple)
    f = 8 * d_model // 3
    return max(multiple, f // multiple * multiple)


class FeedForward(nn.Module):
    """Position-wise MLP: Linear(C -> F), activation, Linear(F -> C); F = 4C by default. Chapter 6.

    activation="swiglu" (Chapter 10) is gated: silu(x W_gate) * (x W_value), then Linear(F -> C); three
    C x F matrices instead of two, so F = swiglu_hidden(C) keeps the parameters of the 4C GELU FFN.

    x (..., C) -> (..., C). Every position is transformed independently with the same weights.
    """

    def __init__(self, d_model: int, d_ff: Optional[int] = None, activation: str = "gelu",
                 bias: bool = False, dropout: float = 0.0):
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        positive_int(d_model=d_model, d_ff=d_ff)
        one_of(sorted(_ACTIVATIONS), activation=activation)
        probability(dropout=dropout)
        self.d_model, self.d_ff, self.activation = d_model, d_ff, activation
        # a gated FFN (SwiGLU, Shazeer 2020) projects up twice, to a gate and a value: up holds both, (2F, C)
        self.up = nn.Linear(d_model, 2 * d_ff if activation in GATED else d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x should have shape (..., {self.d_model}), got {tuple(x.shape)}")
        if self.activation in GATED:
            gate, value = self.up(x).chunk(2, dim=-1)  # (..., C) -> (..., F) twice
            h = _ACTIVATIONS[self.activation](gate) * value
        else:
            h = _ACTIVATIONS[self.activation](self.up(x))  # (..., C) -> (..., F)
        return self.drop(self.down(h))  # (..., F) -> (..., C)


class LayerNorm(nn.Module):
    """Normalise each position's C features to mean 0, variance 1, then scale and shift. Chapter 6.

    x (..., C) -> (..., C). Equal to nn.LayerNorm(C, eps); statistics never mix positions or batch items.
    The from-scratch version is Chapter 6's (layer_norm); this one calls F.layer_norm.
    """

    def __init__(self, d_model: int, eps: float = 1e-5, bias: bool = True):
        super().__init__()
        positive_int(d_model=d_model)
        positive_number(eps=eps)
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x should have shape (..., {self.d_model}), got {tuple(x.shape)}")
        # (x - mean) / sqrt(var + eps) * weight + bias, per position, with the biased variance: Chapter 6 writes it
        # out and checks it against this. Here PyTorch's fused kernel does it, with fewer, faster operations.
        return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)


class RMSNorm(nn.Module):
    """LayerNorm without the mean: x / sqrt(mean(x^2) + eps) * weight (Zhang & Sennrich 2019; LLaMA). Chapter 6.

    x (..., C) -> (..., C). Equal to nn.RMSNorm(C, eps).
    """

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        positive_int(d_model=d_model)
        positive_number(eps=eps)
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x should have shape (..., {self.d_model}), got {tuple(x.shape)}")
        # x * rsqrt(mean(x^2) + eps) * weight, per position: Chapter 6 writes it out; PyTorch's kernel does it here
        return F.rms_norm(x, (self.d_model,), self.weight, self.eps)
