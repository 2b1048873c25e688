"""Chapter 6, multi-head attention and the block: its drawings, the repeat task, and the exercise checkers.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ..attention import Attention
from ..checks import positive_int, returned
from ..diagrams import Diagram

__all__ = ["draw_head_split", "draw_post_pre_norm", "repeat_batch", "block_params", "check_multi_head",
           "check_rms_norm"]


def draw_head_split():
    """Multi-head attention as data flow: project x, split C into H chunks of D = C/H, attend per head, concat, W_O.

    Chapter 6. Rows of the Q, K, V strips are the heads: head h reads chunk h of each and writes chunk h of the
    concatenation, which out_proj (W_O) mixes back into one (T, C) output.
    """
    d = Diagram(14.4, 6.9, title="Multi-head attention: split C into H heads of D = C / H, attend, concatenate, mix")
    mid = 3.6
    d.box(0.8, mid, "x\n(T, C)", role="token", w=1.2, h=1.0)
    d.box(2.75, mid, "$W_Q, W_K, W_V$\nC → C each", role="attn", w=1.9, h=1.2)
    d.arrow((1.4, mid), (1.8, mid))
    rows = [5.7, 4.3, 2.9, 1.5]                      # head 1, head 2, ..., head H
    names = ["head 1", "head 2", None, "head H"]
    cols = {"Q": 4.85, "K": 5.45, "V": 6.05}
    for name, cx in cols.items():
        d.text(cx, rows[0] + 0.75, name, fontsize=10)
    d.text(5.45, rows[-1] - 0.8, "each row: one chunk\nof D columns", fontsize=8, italic=True)
    for y, name in zip(rows, names):
        if name is None:                             # the rows between head 2 and head H
            for x in (*cols.values(), 8.4, 10.5):
                d.text(x, y, "⋮", fontsize=12)
            continue
        d.arrow((3.7, mid), (4.5, y), color="#888888", width=0.9)
        for cx in cols.values():
            d.box(cx, y, "D", role="attn", w=0.55, h=0.75, fontsize=8)
        d.arrow((6.35, y), (7.1, y))
        d.box(8.4, y, f"{name}\nsoftmax($QK^T/\\sqrt{{D}}$) V", role="attn", w=2.6, h=0.95, fontsize=8)
        d.arrow((9.7, y), (10.2, y))
        d.box(10.5, y, name.split()[1], role="attn", w=0.6, h=0.95, fontsize=8)
        d.arrow((10.8, y), (11.6, mid), color="#888888", width=0.9)
    d.text(10.5, rows[0] + 0.75, "concat", fontsize=9)
    d.text(10.5, rows[-1] - 0.8, "(T, H·D) = (T, C)", fontsize=8, italic=True)
    d.box(12.15, mid, "$W_O$\nC → C", role="attn", w=1.1, h=1.0)
    d.arrow((12.7, mid), (13.1, mid))
    d.box(13.7, mid, "out\n(T, C)", role="token", w=1.1, h=1.0)
    return d.figure


def _norm_column(d: Diagram, cx: float, pre: bool):
    """One block, bottom to top, at centre cx: Pre-Norm x + f(LN(x)) or Post-Norm LN(x + f(x)); returns nothing."""
    red = "#c0392b"
    d.box(cx, 1.0, "x (from the block below)", role="token", w=3.0, h=0.6, fontsize=8)
    y = 1.3
    for sub, role in (("multi-head attention", "attn"), ("FFN", "ffn")):
        branch = y + 0.2                            # where the residual leaves the main path
        steps = [("LayerNorm", "norm"), (sub, role)] if pre else [(sub, role)]
        for text, r in steps:
            d.arrow((cx, y), (cx, y + 0.5))
            y += 0.85
            d.box(cx, y, text, role=r, w=2.6, h=0.7)
            y += 0.35
        d.arrow((cx, y), (cx, y + 0.4))
        y += 0.62
        d.circle(cx, y)
        d.line([(cx, branch), (cx - 1.75, branch), (cx - 1.75, y)], color=red, width=1.6)
        d.arrow((cx - 1.75, y), (cx - 0.22, y), color=red, width=1.6)
        y += 0.22
        if not pre:
            d.arrow((cx, y), (cx, y + 0.5))
            y += 0.85
            d.box(cx, y, "LayerNorm", role="norm", w=2.6, h=0.7)
            y += 0.35
    d.arrow((cx, y), (cx, y + 0.5))
    y += 0.8
    if pre:
        d.box(cx, y, "to the next block\n(after the last one: a final LayerNorm)", role="token", w=3.9, h=0.7,
              fontsize=8)
    else:
        d.box(cx, y, "to the next block", role="token", w=3.0, h=0.6, fontsize=8)


def draw_post_pre_norm():
    """Post-Norm (Vaswani et al. 2017, BERT) and Pre-Norm (GPT-2 and later) blocks side by side. Chapter 6.

    Red: the residual paths. In Post-Norm every path from the output back to x passes a LayerNorm; in
    Pre-Norm the residual path has none, which is why Pre-Norm's gradients stay even and it trains without warmup.
    """
    d = Diagram(12.6, 10.0, title="Where the LayerNorm goes")
    for cx, pre, head, rule in ((3.3, False, "Post-Norm (2017 paper, BERT)", "x ← LN(x + f(x))"),
                                (9.4, True, "Pre-Norm (GPT-2 and later)", "x ← x + f(LN(x))")):
        d.text(cx - 0.3, 9.7, head, fontsize=10)
        d.text(cx - 0.3, 9.3, rule, fontsize=9, italic=True)
        _norm_column(d, cx, pre)
    d.text(3.1, 0.35, "every path back to x passes a LayerNorm", fontsize=8, color="#c0392b")
    d.text(9.2, 0.35, "the residual path (red) has no LayerNorm on it", fontsize=8, color="#c0392b")
    return d.figure


def repeat_batch(batch_size: int, seq_len: int, n_values: int = 32, min_len: int = 4, max_len: Optional[int] = None,
                 generator: Optional[torch.Generator] = None):
    """A random segment written twice in a row, at a random place among random tokens: continue the copy. Chapter 6.

    Each row: p random tokens, a segment of L random tokens (L uniform in min_len..max_len, default seq_len // 3),
    the same segment again, random tokens up to seq_len + 1; p and L vary by row, so no fixed offset finds the
    copy. Returns x (B, T) ids, y (B, T) the next tokens (x shifted by one), and copy (B, T), True where y is
    the next token of the second copy, predictable from the first: find where the current token occurred in
    the first copy, and read the token after it. That is two lookups, one per attention layer (an induction head).
    """
    positive_int(batch_size=batch_size, seq_len=seq_len, n_values=n_values, min_len=min_len)
    max_len = seq_len // 3 if max_len is None else positive_int(max_len=max_len)
    if not 2 <= min_len <= max_len or 2 * max_len > seq_len or n_values < 2:
        raise ValueError(f"need 2 <= min_len <= max_len, 2 * max_len <= seq_len and n_values >= 2, got "
                         f"min_len={min_len}, max_len={max_len}, seq_len={seq_len}, n_values={n_values}")
    w = torch.randint(0, n_values, (batch_size, seq_len + 1), generator=generator)
    copy = torch.zeros(batch_size, seq_len, dtype=torch.bool)
    lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator)
    starts = (torch.rand(batch_size, generator=generator) * (seq_len + 2 - 2 * lengths)).long()   # p in 0..T+1-2L
    for b, (L, p) in enumerate(zip(lengths.tolist(), starts.tolist())):
        w[b, p + L:p + 2 * L] = w[b, p:p + L]
        copy[b, p + L:p + 2 * L - 1] = True          # x at the second copy's first L - 1 tokens -> y its next one
    return w[:, :-1], w[:, 1:], copy


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
