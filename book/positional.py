"""Position information for attention: sinusoidal, learned and rotary (RoPE). Chapter 5.

Shape legend (batch first): B batch, T time, C = d_model, H heads, D head dim (d_head).

Two ways to tell attention where a token sits:
- absolute, added to the token embeddings before the first layer:
  `SinusoidalPositionalEncoding` (Vaswani et al. 2017, fixed formula) and
  `LearnedPositionalEmbedding` (a trained table, as in GPT-2 and BERT, with a hard maximum length);
- relative, applied to queries and keys inside every attention layer:
  `RotaryEmbedding` (Su et al. 2021, RoFormer), which rotates 2-D pairs of q and k by an angle
  proportional to the position, so that q_m . k_n depends only on n - m.

Every module here is built as (width, context_len): (d_model, context_len) for the absolute ones,
(d_head, context_len) for RoPE. Both absolute modules share one calling convention, `forward(x, offset=0)`:
an int `x = T` returns the (T, C) encodings of positions offset .. offset+T-1; a tensor x of shape
(B, T, C) returns x plus those encodings (B, T, C). Pairs are interleaved everywhere: dims (2i, 2i+1)
hold sin/cos (sinusoidal) or form the i-th rotated plane (RoPE), with frequency base^(-2i/dim).
"""
from __future__ import annotations

from typing import Callable, Union

import torch
from torch import nn

from .checks import positive_int

__all__ = [
    "pair_frequencies",
    "sinusoidal_table",
    "sinusoidal_shift_matrix",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "rope_rotation_matrix",
    "apply_rotary",
    "RotaryEmbedding",
    "check_shift_matrix",
]


def _check_even(dim: int, name: str) -> None:
    """The one check book.checks lacks: an even width (dims come in sin/cos pairs)."""
    if positive_int(**{name: dim}) % 2:
        raise ValueError(f"{name} must be a positive even int (dims come in sin/cos pairs), got {dim!r}")


def pair_frequencies(dim: int, base: float = 10000.0) -> torch.Tensor:
    """Angular frequency of each 2-D pair, theta_i = base^(-2i/dim), shape (dim/2,). Chapter 5.

    Example: pair_frequencies(4) -> [1.0, 0.01]: pair 0 turns 1 radian per position, pair 1 0.01.
    """
    _check_even(dim, "dim")
    if base <= 1:
        raise ValueError(f"base must be > 1, got {base}")
    return base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)


def _angles(start: int, T: int, dim: int, base: float) -> torch.Tensor:
    """Angles pos * theta_i for pos = start .. start+T-1, shape (T, dim/2), float64 for accuracy."""
    pos = torch.arange(start, start + T, dtype=torch.float64)
    return pos[:, None] * pair_frequencies(dim, base)[None, :]


def sinusoidal_table(T: int, d_model: int, base: float = 10000.0, start: int = 0) -> torch.Tensor:
    """(T, C) table with PE[pos, 2i] = sin(pos theta_i), PE[pos, 2i+1] = cos(pos theta_i). Chapter 5."""
    if T < 0 or start < 0:
        raise ValueError(f"T and start must be >= 0, got T={T}, start={start}")
    ang = _angles(start, T, d_model, base)  # (T, C/2)
    return torch.stack([ang.sin(), ang.cos()], dim=-1).flatten(-2).float()  # (T, C/2, 2) -> (T, C)


def sinusoidal_shift_matrix(k: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The (C, C) matrix M_k with PE[pos + k] = M_k @ PE[pos] for every pos. Chapter 5.

    Block diagonal: pair i gets [[cos k theta_i, sin k theta_i], [-sin k theta_i, cos k theta_i]],
    from sin(a + b) = sin a cos b + cos a sin b and cos(a + b) = cos a cos b - sin a sin b.
    """
    c, s = (k * pair_frequencies(d_model, base)).cos(), (k * pair_frequencies(d_model, base)).sin()
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    idx = torch.arange(0, d_model, 2)
    M[idx, idx], M[idx, idx + 1], M[idx + 1, idx], M[idx + 1, idx + 1] = c, s, -s, c
    return M


class _AbsolutePositions(nn.Module):
    """Shared calling convention: int T -> (T, C) encodings; (B, T, C) tensor -> x + encodings."""

    def table(self, T: int, offset: int) -> torch.Tensor:  # pragma: no cover - overridden
        raise NotImplementedError

    def forward(self, x: Union[int, torch.Tensor], offset: int = 0) -> torch.Tensor:
        if isinstance(x, int):
            return self.table(x, offset)  # (T, C)
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x should have shape (B, T, {self.d_model}), got {tuple(x.shape)}")
        return x + self.table(x.shape[1], offset).to(x.dtype)  # (B, T, C) + (T, C)


class SinusoidalPositionalEncoding(_AbsolutePositions):
    """Fixed sin/cos position encodings (Vaswani et al. 2017), no parameters. Chapter 5.

    forward(T) -> (T, C); forward(x (B, T, C), offset=0) -> x + PE[offset : offset+T].
    `context_len` only sizes the precomputed buffer: later positions are computed from the formula,
    so there is no hard maximum length (whether a model trained on short inputs copes is another matter).
    """

    def __init__(self, d_model: int, context_len: int = 1024, base: float = 10000.0):
        super().__init__()
        _check_even(d_model, "d_model")
        self.d_model, self.context_len, self.base = d_model, context_len, base
        self.register_buffer("pe", sinusoidal_table(context_len, d_model, base), persistent=False)

    def table(self, T: int, offset: int = 0) -> torch.Tensor:
        if offset < 0 or T < 0:
            raise ValueError(f"T and offset must be >= 0, got T={T}, offset={offset}")
        if offset + T <= self.context_len:
            return self.pe[offset : offset + T]
        return sinusoidal_table(T, self.d_model, self.base, start=offset).to(self.pe.device)


class LearnedPositionalEmbedding(_AbsolutePositions):
    """A trained (context_len, C) table of position vectors (GPT-2, BERT). Chapter 5.

    forward(T) -> (T, C); forward(x (B, T, C), offset=0) -> x + table[offset : offset+T].
    Positions >= context_len have no row: asking for one raises IndexError (the hard length limit).
    """

    def __init__(self, d_model: int, context_len: int, init_std: float = 0.02):
        super().__init__()
        positive_int(d_model=d_model, context_len=context_len)
        self.d_model, self.context_len = d_model, context_len
        self.weight = nn.Parameter(torch.randn(context_len, d_model) * init_std)

    def table(self, T: int, offset: int = 0) -> torch.Tensor:
        if offset < 0 or T < 0:
            raise ValueError(f"T and offset must be >= 0, got T={T}, offset={offset}")
        if offset + T > self.context_len:
            raise IndexError(
                f"learned positions exist only for 0..{self.context_len - 1}; asked for up to "
                f"{offset + T - 1} (T={T}, offset={offset}). A longer input needs a bigger, retrained table."
            )
        return self.weight[offset : offset + T]


def rope_rotation_matrix(pos: int, d_head: int, base: float = 10000.0) -> torch.Tensor:
    """The (D, D) block-diagonal rotation R_pos of RoPE: pair i turns by pos * theta_i. Chapter 5.

    Rows act on column vectors: rotated = R_pos @ x. Orthogonal, and R_m^T R_n = R_(n-m).
    """
    ang = pos * pair_frequencies(d_head, base)
    c, s = ang.cos(), ang.sin()
    R = torch.zeros(d_head, d_head, dtype=torch.float64)
    idx = torch.arange(0, d_head, 2)
    R[idx, idx], R[idx, idx + 1], R[idx + 1, idx], R[idx + 1, idx + 1] = c, -s, s, c
    return R


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each interleaved pair (x_2i, x_2i+1) of x (..., T, D) by angles with cos/sin (T, D/2)."""
    x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)  # (..., T, D) -> two (..., T, D/2)
    out = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)  # (..., T, D/2, 2)
    return out.flatten(-2).to(x.dtype)  # (..., T, D)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (Su et al. 2021) for queries and keys; no parameters. Chapter 5.

    forward(x, offset=0): x (B, H, T, D) (any (..., T, D)) -> same shape, with the
    token at time t rotated as position offset + t (offset = number of cached tokens when decoding
    with a KV cache). Use it on q and k, never on v. `context_len` sizes the cos/sin cache only;
    positions beyond it are computed from the formula.
    """

    def __init__(self, d_head: int, context_len: int = 4096, base: float = 10000.0):
        super().__init__()
        _check_even(d_head, "d_head")
        self.d_head, self.context_len, self.base = d_head, context_len, base
        ang = _angles(0, context_len, d_head, base)  # (context_len, D/2)
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)

    def cos_sin(self, T: int, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of the angles of positions offset .. offset+T-1, each (T, D/2)."""
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        if offset + T <= self.context_len:
            return self.cos[offset : offset + T], self.sin[offset : offset + T]
        ang = _angles(offset, T, self.d_head, self.base).to(self.cos.device)
        return ang.cos().float(), ang.sin().float()

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        if x.dim() < 2 or x.shape[-1] != self.d_head:
            raise ValueError(f"x should have shape (..., T, {self.d_head}), got {tuple(x.shape)}")
        cos, sin = self.cos_sin(x.shape[-2], offset)
        return apply_rotary(x, cos.to(x.device), sin.to(x.device))



def check_shift_matrix(fn: Callable, d_model: int = 8, base: float = 10000.0) -> bool:
    """Self-check for the chapter 5 exercise: does `fn(k, d_model)` return M_k with PE[pos+k] = M_k PE[pos]?

    Tries k in {0, 1, 3, 17} on positions 0..49; raises AssertionError with a hint on the first miss.
    """
    pe = sinusoidal_table(50 + 17, d_model, base).double()
    for k in (0, 1, 3, 17):
        M = torch.as_tensor(fn(k, d_model), dtype=torch.float64)
        if tuple(M.shape) != (d_model, d_model):
            raise AssertionError(f"M_{k} should have shape ({d_model}, {d_model}), got {tuple(M.shape)}")
        got = pe[:50] @ M.T  # row pos holds (M_k PE[pos])^T
        if not torch.allclose(got, pe[k : k + 50], atol=1e-5):
            raise AssertionError(f"M_{k} @ PE[pos] is not PE[pos + {k}] (check the signs of the sin terms)")
    return True
