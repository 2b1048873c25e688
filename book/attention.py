"""Scaled dot-product attention and masks: the teaching version and the fast path. Chapter 4.

Shape legend (batch first): B batch, T time (Tq queries, Tk keys when they differ),
C = d_model, H heads, D head dim (Dv for values when it differs). Leading dims `...` are any
batch dims, e.g. (B, H).

Mask convention everywhere in the book (the same as PyTorch's boolean `attn_mask`):
True = keep (query i may look at key j), False = blocked (its weight is exactly 0).
"""
from __future__ import annotations

import math
import os
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

import torch
import torch.nn.functional as F

__all__ = [
    "causal_mask",
    "padding_mask",
    "sliding_window_mask",
    "scaled_dot_product_attention",
    "attention",
    "check_attention",
    "peak_cpu_memory",
]


def causal_mask(T: int, device=None) -> torch.Tensor:
    """Boolean (T, T) mask, True where query i may attend to key j (j <= i). Chapter 4.

    Example: causal_mask(3) -> [[T, F, F], [T, T, F], [T, T, T]]
    """
    if not isinstance(T, int) or isinstance(T, bool) or T < 1:
        raise ValueError(f"T must be a positive int, got {T!r}")
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def sliding_window_mask(Tq: int, Tk: Optional[int] = None, window: int = 1, start: Optional[int] = None,
                        device=None) -> torch.Tensor:
    """(Tq, Tk) bool: query i (at position start + i) may see key j iff 0 <= (start + i) - j < window. Chapter 10.

    Causal attention limited to the `window` latest keys, the query's own included (Mistral, Gemma 2,
    GPT-OSS). Tk defaults to Tq and start to Tk - Tq (the queries are the last Tq positions)."""
    Tk = Tq if Tk is None else Tk
    start = Tk - Tq if start is None else start
    for name, v in (("Tq", Tq), ("Tk", Tk), ("window", window)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if start + Tq > Tk or start < 0:
        raise ValueError(f"queries at positions {start}..{start + Tq - 1} need keys up to there, got Tk={Tk}")
    gap = (start + torch.arange(Tq, device=device))[:, None] - torch.arange(Tk, device=device)  # (Tq, Tk)
    return (gap >= 0) & (gap < window)


def padding_mask(lengths: torch.Tensor, T: int) -> torch.Tensor:
    """Boolean (B, 1, 1, T) key mask, True for the first lengths[b] keys of sequence b. Chapter 4.

    Broadcasts against attention scores (B, H, Tq, Tk). Example: lengths [2], T=3 -> [[[[T, T, F]]]]
    """
    if not isinstance(T, int) or isinstance(T, bool) or T < 1:
        raise ValueError(f"T must be a positive int, got {T!r}")
    if not isinstance(lengths, torch.Tensor) or lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        got = lengths.dtype if isinstance(lengths, torch.Tensor) else type(lengths).__name__
        raise TypeError(f"lengths must be an integer tensor of shape (B,), got {got}")
    if lengths.dim() != 1:
        raise ValueError(f"lengths should have shape (B,), got {tuple(lengths.shape)}")
    if (lengths < 0).any() or (lengths > T).any():
        raise ValueError(f"lengths must lie in [0, {T}], got {lengths.tolist()}")
    keep = torch.arange(T, device=lengths.device)[None, :] < lengths[:, None]  # (B, T)
    return keep[:, None, None, :]


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Raise ValueError unless q (..., Tq, D), k (..., Tk, D), v (..., Tk, Dv) fit together."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() < 2:
            raise ValueError(f"{name} should have shape (..., T, D), got {tuple(t.shape)}")
    if not q.dtype.is_floating_point or not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share one floating-point dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must share the last dim D: q (..., Tq, D) and k (..., Tk, D), "
            f"got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of keys Tk: k (..., Tk, D) and v (..., Tk, Dv), "
            f"got k {tuple(k.shape)} and v {tuple(v.shape)}"
        )


def _check_mask(mask: torch.Tensor, Tq: int, Tk: int) -> None:
    """Raise ValueError unless mask is boolean, broadcastable to (..., Tq, Tk), and leaves every query a key.

    A query row whose keys are all blocked would get NaN weights (softmax over nothing). That is almost
    always a mask in the opposite convention (True = padding, as nn.Transformer's key_padding_mask), so
    it is an error here rather than silent NaN.
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a bool torch.Tensor (True = may attend), got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor (True = keep), got dtype {mask.dtype}")
    if mask.dim() < 2 or mask.shape[-2] not in (1, Tq) or mask.shape[-1] not in (1, Tk):
        raise ValueError(
            f"mask should broadcast to (..., Tq, Tk) = (..., {Tq}, {Tk}), got {tuple(mask.shape)}"
        )
    blocked_rows = ~mask.any(dim=-1)  # (..., Tq or 1): True where a query may attend to no key at all
    if blocked_rows.any():
        n = int(blocked_rows.sum())
        raise ValueError(
            f"mask blocks every key for {n} query row(s), whose attention weights would be NaN. "
            "The convention here is True = may attend (keep), False = blocked; a mask that is True at "
            "padding (nn.Transformer's key_padding_mask) must be inverted with ~mask first"
        )


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor] = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(D)) v, written out; returns (out, weights). Chapter 4.

    q (..., Tq, D), k (..., Tk, D), v (..., Tk, Dv), mask bool broadcastable to (..., Tq, Tk),
    True = keep. Returns out (..., Tq, Dv) and weights (..., Tq, Tk); blocked weights are exactly 0.
    A mask that blocks every key of some query is rejected with a ValueError (its softmax would be NaN,
    as in PyTorch's math path): it is usually a mask in the opposite convention, True = padding.
    """
    _check_qkv(q, k, v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, D) @ (..., D, Tk) -> (..., Tq, Tk)
    if mask is not None:
        _check_mask(mask, q.shape[-2], k.shape[-2])
        scores = scores.masked_fill(~mask, float("-inf"))  # exp(-inf) = 0: blocked keys get no weight
    weights = scores.softmax(dim=-1)  # each row sums to 1 over the keys
    return weights @ v, weights  # (..., Tq, Tk) @ (..., Tk, Dv) -> (..., Tq, Dv)


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: Optional[torch.Tensor] = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Fast path: PyTorch's fused scaled dot-product attention; returns out (..., Tq, Dv). Chapter 4.

    Same maths and mask convention (bool, True = keep) as `scaled_dot_product_attention`, but the
    (Tq, Tk) weight matrix is never returned (and, on flash/memory-efficient kernels, never stored).
    Pass either `mask` or `is_causal=True`, not both. `dropout_p` applies attention dropout (training).
    """
    _check_qkv(q, k, v)
    if mask is not None and is_causal:
        raise ValueError("pass either mask or is_causal=True, not both (build the combined mask yourself)")
    if mask is not None:
        _check_mask(mask, q.shape[-2], k.shape[-2])
    if is_causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"is_causal=True needs as many queries as keys (Tq == Tk), got Tq={q.shape[-2]}, "
                         f"Tk={k.shape[-2]}; for queries that come after cached keys, build the mask yourself")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must lie in [0, 1), got {dropout_p}")
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)


def check_attention(fn: Callable, seed: int = 0) -> bool:
    """Self-check for the chapter 4 exercise: does `fn(q, k, v, mask)` compute masked attention output?

    Tries shapes with all dims distinct (B=2, H=3, Tq=5, Tk=7, D=8, Dv=4), with and without a mask;
    `fn` may return out or (out, weights). Raises AssertionError with a hint on the first mismatch.
    """
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g), torch.randn(2, 3, 7, 8, generator=g),
               torch.randn(2, 3, 7, 4, generator=g))
    mask = torch.rand(5, 7, generator=g) > 0.4
    mask[:, 0] = True  # every query keeps at least one key
    for m in (None, mask):
        got = fn(q, k, v, m)
        got = got[0] if isinstance(got, tuple) else got
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
        if tuple(got.shape) != tuple(want.shape):
            raise AssertionError(f"output should have shape {tuple(want.shape)}, got {tuple(got.shape)}")
        if not torch.allclose(got, want, atol=1e-5, rtol=1e-4):
            hint = "with the mask" if m is not None else "without a mask (check the 1/sqrt(D) scale)"
            raise AssertionError(f"values differ from F.scaled_dot_product_attention {hint}")
    return True


@contextmanager
def _silence_fd2() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null: the profiler's C++ layer logs there on every start/stop."""
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_cpu_memory(fn: Callable[[], object]) -> int:
    """Peak bytes of CPU memory that `fn()` allocates beyond what existed before, measured. Chapter 4.

    Replays torch.profiler's allocation and free events in time order (allocations at an op's start,
    frees at its end), so kernel-internal buffers count too. CPU tensors only.
    """
    from torch.profiler import ProfilerActivity, profile

    with _silence_fd2(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    steps = sorted((e.time_range.start if e.self_cpu_memory_usage > 0 else e.time_range.end,
                    e.self_cpu_memory_usage) for e in prof.events() if e.self_cpu_memory_usage)
    live = peak = 0
    for _, delta in steps:
        live += delta
        peak = max(peak, live)
    return peak
