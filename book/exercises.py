"""Self-checks for the exercises of Chapters 6, 7 and 10, and the counts they compare against.

Each check_* runs a learner's function on cases with every dimension different and raises AssertionError with a
hint at the first mismatch (prints a line and returns True when all pass). Chapter 4's check_attention lives
beside the attention maths (book.attention), Chapter 5's check_shift_matrix in book.positional and Chapter 8's
checks in book.transformer.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from .attention import Attention
from .checks import positive_int, returned
from .kv_cache import kv_cache_bytes

__all__ = ["block_params", "check_multi_head", "check_rms_norm", "check_kv_cache_bytes"]


def block_params(d_model: int, d_ff: Optional[int] = None) -> int:
    """Weights of one bias-free block, attention 4C^2 + FFN 2CF (= 12C^2 when F = 4C), norms ignored. Chapter 6."""
    positive_int(d_model=d_model)
    d_ff = 4 * d_model if d_ff is None else positive_int(d_ff=d_ff)
    return 4 * d_model * d_model + 2 * d_model * d_ff


def check_multi_head(fn, seed: int = 0) -> bool:
    """Self-check for the chapter 6 exercise: does `fn(x, mha)` compute mha(x) with a loop over heads?

    `fn` gets x (B, T, C) and a book.attention.Attention `mha` (no mask, not causal) and should return
    out (B, T, C) using only mha.q_proj, k_proj, v_proj, out_proj weights. Tried with B=2, T=5, C=12, H=3.
    """
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    mha = Attention(12, 3)
    x = torch.randn(2, 5, 12, generator=g)
    with torch.no_grad():
        want, got = mha(x, causal=False), returned(fn(x, mha))
    if tuple(got.shape) != (2, 5, 12):
        raise AssertionError(f"output should have shape (2, 5, 12) = (B, T, C), got {tuple(got.shape)}")
    if not torch.allclose(got, want, atol=1e-5, rtol=1e-4):
        raise AssertionError("values differ from book.attention.Attention. Hints: head h uses rows h*D:(h+1)*D of "
                             "each projection weight; scale by sqrt(D), not sqrt(C); concatenate, then out_proj.")
    print("Correct: your loop over heads computes exactly what the batched Attention computes.")
    return True


def check_rms_norm(fn, seed: int = 0) -> bool:
    """Self-check for the chapter 6 exercise: does `fn(x, weight, eps)` compute RMSNorm over the last dim?"""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 5, 8, generator=g) * 3 + 1
    w = torch.randn(8, generator=g)
    want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    got = returned(fn(x, w, 1e-6))
    if tuple(got.shape) != tuple(x.shape):
        raise AssertionError(f"output should have shape {tuple(x.shape)}, got {tuple(got.shape)}")
    if not torch.allclose(got, want, atol=1e-5, rtol=1e-4):
        hint = "do not subtract the mean" if torch.allclose(got, F.layer_norm(x, (8,), w, None, 1e-6),
                                                           atol=1e-5) else "divide by sqrt(mean(x^2) + eps)"
        raise AssertionError(f"values differ from RMSNorm over the last dim. Hint: {hint}, then scale by weight.")
    print("Correct: your RMSNorm matches the reference.")
    return True


def check_kv_cache_bytes(fn) -> bool:
    """Self-check for the chapter 7 exercise: fn(n_layers, n_kv_heads, d_head, context_len, batch_size, bytes)."""
    cases = [(32, 8, 128, 8192, 1, 2), (4, 4, 32, 64, 3, 4), (80, 8, 128, 4096, 2, 2), (2, 1, 5, 7, 1, 1)]
    for args in cases:
        want, got = kv_cache_bytes(*args), fn(*args)
        if got != want:
            raise AssertionError(f"for (n_layers, n_kv_heads, d_head, context_len, batch, bytes) = {args}: expected "
                                 f"{want:,} bytes, got {got!r}. Hint: K and V are both cached, in every layer.")
    print("Correct: your KV-cache arithmetic matches in every case.")
    return True
