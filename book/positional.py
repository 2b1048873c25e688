"""Position information for attention: sinusoidal, learned and rotary (RoPE). Chapter 5.

Shape legend (batch first): B batch, T time, C = d_model, H heads, D head dim (d_head).

Two ways to tell attention where a token sits:
- absolute, added to the token embeddings before the first layer:
  `SinusoidalPositionalEncoding` (Vaswani et al. 2017, fixed formula) and
  `LearnedPositionalEmbedding` (a trained table, as in GPT-2 and BERT, with a hard maximum length);
- relative, applied to queries and keys inside every attention layer:
  `RotaryEmbedding` (Su et al. 2021, RoFormer), which rotates 2-D pairs of q and k by an angle
  proportional to the position, so that q_m . k_n depends only on n - m;
- relative, added to the attention scores: `alibi_bias` (Press et al. 2022, ALiBi), -m_h |i - j| per head,
  with no position vectors at all.

`CopyBackModel` is the one-layer, multi-head model chapter 5 trains with each of them on `copy_back_batch`
(book.tasks), to see what happens when the needed distance grows beyond training.

Every module here is built as (width, context_len): (d_model, context_len) for the absolute ones,
(d_head, context_len) for RoPE. Both absolute modules share one calling convention, `forward(x, offset=0)`:
an int `x = T` returns the (T, C) encodings of positions offset .. offset+T-1; a tensor x of shape
(B, T, C) returns x plus those encodings (B, T, C). Pairs are interleaved everywhere: dims (2i, 2i+1)
hold sin/cos (sinusoidal) or form the i-th rotated plane (RoPE), with frequency base^(-2i/dim).
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Optional, Union

import torch
from torch import nn

from .checks import non_negative_int, one_of, positive_int, positive_number, tensor_dims, token_ids

__all__ = [
    "pair_frequencies",
    "sinusoidal_table",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "apply_rotary",
    "RotaryEmbedding",
    "alibi_slopes",
    "alibi_bias",
    "POSITION_SCHEMES",
    "CopyBackModel",
]


def _count(**fields) -> None:
    """Each keyword must be an integer >= 0 (a position or a length; numpy ints pass, bools and floats do not)."""
    for name, v in fields.items():
        if isinstance(v, torch.SymInt):      # a size while torch.compile traces with dynamic shapes
            continue
        if isinstance(v, bool) or not isinstance(v, Integral) or v < 0:
            raise ValueError(f"{name} must be >= 0 (an int), got {v!r}")


def _check_even(dim: int, name: str) -> None:
    """The one check book.checks lacks: an even width (dims come in sin/cos pairs)."""
    if positive_int(**{name: dim}) % 2:
        raise ValueError(f"{name} must be a positive even int (dims come in sin/cos pairs), got {dim!r}")


def pair_frequencies(dim: int, base: float = 10000.0) -> torch.Tensor:
    """Angular frequency of each 2-D pair, theta_i = base^(-2i/dim), shape (dim/2,). Chapter 5.

    Example: pair_frequencies(4) -> [1.0, 0.01]: pair 0 turns 1 radian per position, pair 1 0.01.
    """
    _check_even(dim, "dim")
    if isinstance(base, bool) or not isinstance(base, Real) or not (math.isfinite(base) and base > 1):
        raise ValueError(f"base must be > 1 (a finite number), got {base!r}")
    return base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)


def _angles(start: int, T: int, dim: int, base: float, interpolation: float = 1.0) -> torch.Tensor:
    """Angles (pos / interpolation) * theta_i for pos = start .. start+T-1, shape (T, dim/2), float64 for accuracy."""
    pos = torch.arange(start, start + T, dtype=torch.float64)
    if interpolation != 1.0:
        pos = pos / interpolation
    return pos[:, None] * pair_frequencies(dim, base)[None, :]


def sinusoidal_table(T: int, d_model: int, base: float = 10000.0, start: int = 0) -> torch.Tensor:
    """(T, C) table with PE[pos, 2i] = sin(pos theta_i), PE[pos, 2i+1] = cos(pos theta_i). Chapter 5."""
    _count(T=T, start=start)
    ang = _angles(start, T, d_model, base)  # (T, C/2)
    return torch.stack([ang.sin(), ang.cos()], dim=-1).flatten(-2).float()  # (T, C/2, 2) -> (T, C)


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
        _count(context_len=context_len)
        self.d_model, self.context_len, self.base = d_model, context_len, base
        self.register_buffer("pe", sinusoidal_table(context_len, d_model, base), persistent=False)

    def table(self, T: int, offset: int = 0) -> torch.Tensor:
        _count(T=T, offset=offset)
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
        _count(T=T, offset=offset)
        if offset + T > self.context_len:
            raise IndexError(
                f"learned positions exist only for 0..{self.context_len - 1}; asked for up to "
                f"{offset + T - 1} (T={T}, offset={offset}). A longer input needs a bigger, retrained table."
            )
        return self.weight[offset : offset + T]


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

    `interpolation` s > 0 is position interpolation (Chen et al. 2023): token t is rotated as position t / s, so
    a model trained on L positions reads s * L of them at angles it saw in training (s = new length / trained
    length). s = 1 is plain RoPE. `set_interpolation(s)` changes it on a trained model.
    """

    def __init__(self, d_head: int, context_len: int = 4096, base: float = 10000.0, interpolation: float = 1.0):
        super().__init__()
        _check_even(d_head, "d_head")
        _count(context_len=context_len)
        self.d_head, self.context_len, self.base = d_head, context_len, base
        self.register_buffer("cos", torch.empty(0), persistent=False)
        self.register_buffer("sin", torch.empty(0), persistent=False)
        self.set_interpolation(interpolation)

    def set_interpolation(self, interpolation: float) -> "RotaryEmbedding":
        """Rotate token t as position t / interpolation from now on (1 = plain RoPE); returns self."""
        positive_number(interpolation=interpolation)
        self.interpolation = float(interpolation)
        ang = _angles(0, self.context_len, self.d_head, self.base, self.interpolation)  # (context_len, D/2)
        device = self.cos.device
        self.cos, self.sin = ang.cos().float().to(device), ang.sin().float().to(device)
        return self

    def cos_sin(self, T: int, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of the angles of positions offset .. offset+T-1, each (T, D/2)."""
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        if offset + T <= self.context_len:
            return self.cos[offset : offset + T], self.sin[offset : offset + T]
        ang = _angles(offset, T, self.d_head, self.base, self.interpolation).to(self.cos.device)
        return ang.cos().float(), ang.sin().float()

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        if x.dim() < 2 or x.shape[-1] != self.d_head:
            raise ValueError(f"x should have shape (..., T, {self.d_head}), got {tuple(x.shape)}")
        cos, sin = self.cos_sin(x.shape[-2], offset)
        return apply_rotary(x, cos.to(x.device), sin.to(x.device))


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's head slopes m_h (Press et al. 2022), shape (H,). Chapter 5.

    For H a power of two, m_h = 2^(-8h/H), h = 1..H: a geometric sequence from 2^(-8/H) down to 2^-8.
    Otherwise (as the paper's code does) the slopes of the nearest lower power of two P, followed by every
    other slope of 2P, until there are H: the extra heads interleave between the first ones.
    Example: alibi_slopes(4) -> [0.25, 0.0625, 0.015625, 0.00390625].
    """
    positive_int(n_heads=n_heads)

    def geometric(n):  # n a power of two
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    p = 2 ** math.floor(math.log2(n_heads))
    slopes = geometric(p) + geometric(2 * p)[0::2][: n_heads - p]
    return torch.tensor(slopes)


def alibi_bias(T: int, n_heads: int, Tk: Optional[int] = None, start: Optional[int] = None) -> torch.Tensor:
    """ALiBi's additive score bias -m_h |i - j|, float (H, Tq, Tk), to add to q.k / sqrt(D). Chapter 5.

    Query i sits at position start + i (start defaults to Tk - Tq: the queries are the last Tq positions, as
    when decoding with a cache), key j at position j. Symmetric in i - j: combine it with a causal mask (True =
    may attend) for a decoder, as Press et al. do, or use it alone for a bidirectional encoder.
    Example: alibi_bias(3, 1)[0] = -2^-8 * [[0, 1, 2], [1, 0, 1], [2, 1, 0]].
    """
    positive_int(T=T, n_heads=n_heads)
    Tk = T if Tk is None else positive_int(Tk=Tk)
    if start is None and Tk < T:
        raise ValueError(f"Tk must be >= T when start is not given (the queries are the last T of the Tk "
                         f"positions), got T={T}, Tk={Tk}")
    start = Tk - T if start is None else non_negative_int(start=start)
    distance = (torch.arange(start, start + T)[:, None] - torch.arange(Tk)[None, :]).abs()  # (Tq, Tk)
    return -alibi_slopes(n_heads)[:, None, None] * distance  # (H, Tq, Tk)


POSITION_SCHEMES = ("none", "sinusoidal", "learned", "rope", "alibi")


class CopyBackModel(nn.Module):
    """One causal multi-head attention layer over token embeddings, read out at the last position. Chapter 5.

    `positions` picks how position enters: "none", "sinusoidal" or "learned" (added to the embeddings),
    "rope" (rotates q and k in every head) or "alibi" (-m_h |i - j| added to every head's scores).
    forward(x (B, T) ids) -> logits (B, V) at the last position; `weights(x)` -> (B, H, T, T) attention.
    `context_len` sizes the position tables; the learned one has no row beyond it (IndexError), the others
    compute later positions from their formulas.
    """
    # Why its own attention and not book.attention.Attention: book.attention imports this module (RotaryEmbedding),
    # so this layer cannot import Attention back (CONTRIBUTING, "The package's layers"), and moving the class up
    # would move the import path benchmarks/copy_back.py uses (pinned by sha256 to book/results/copy_back.csv).
    # Attention also has no additive score bias for ALiBi, and its default path (the fused kernel) differs from
    # this written-out softmax by about 2e-7, which would move chapter 5's trained numbers; with need_weights=True
    # it gives these bits exactly (same creation order of q/k/v/out_proj, same arithmetic).

    def __init__(self, vocab_size: int, positions: str = "none", d_model: int = 32, n_heads: int = 4,
                 context_len: int = 64):
        super().__init__()
        positive_int(vocab_size=vocab_size, d_model=d_model, n_heads=n_heads, context_len=context_len)
        one_of(POSITION_SCHEMES, positions=positions)
        if d_model % n_heads or (d_model // n_heads) % 2:
            raise ValueError(f"d_model / n_heads must be an even int (RoPE's pairs), got {d_model} / {n_heads}")
        self.positions, self.n_heads, self.d_head = positions, n_heads, d_model // n_heads
        self.embed = nn.Embedding(vocab_size, d_model)
        self.absolute = None  # added to the embeddings: sinusoidal or learned (at the sinusoid's scale)
        if positions == "sinusoidal":
            self.absolute = SinusoidalPositionalEncoding(d_model, context_len)
        elif positions == "learned":
            self.absolute = LearnedPositionalEmbedding(d_model, context_len, init_std=0.7)
        self.rope = RotaryEmbedding(self.d_head, context_len) if positions == "rope" else None
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d_model, d_model, bias=False)
                                                                for _ in range(4))
        self.readout = nn.Linear(d_model, vocab_size)

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        B, T, _ = t.shape
        return t.view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)

    def _embed_qkv(self, x: torch.Tensor):
        tensor_dims(x, 2, "x")
        token_ids(x, self.embed.num_embeddings, "x")
        h = self.embed(x)  # (B, T, C)
        h = self.absolute(h) if self.absolute is not None else h
        q, k, v = (self._heads(p(h)) for p in (self.q_proj, self.k_proj, self.v_proj))
        if self.rope is not None:
            q, k = self.rope(q), self.rope(k)
        return h, q, k, v

    def weights(self, x: torch.Tensor) -> torch.Tensor:
        """Attention weights (B, H, T, T) of the layer, causal, with ALiBi's bias when positions="alibi"."""
        _, q, k, _ = self._embed_qkv(x)
        return self._weights(q, k)

    def _weights(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        T = q.shape[-2]
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, H, T, T)
        if self.positions == "alibi":
            scores = scores + alibi_bias(T, self.n_heads).to(scores)
        keep = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()  # True = may attend
        return scores.masked_fill(~keep, float("-inf")).softmax(-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, q, k, v = self._embed_qkv(x)
        mixed = (self._weights(q, k) @ v).transpose(1, 2).flatten(2)  # (B, H, T, D) -> (B, T, C)
        h = h + self.out_proj(mixed)
        return self.readout(h[:, -1])  # (B, V) at the last position
