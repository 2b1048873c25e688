"""Chapter 4, self-attention: the Q/K/V drawing, the CPU memory peak it measures, and the attention exercise checker.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

from ..checks import returned
from ..diagrams import Diagram

__all__ = ["draw_qkv_flow", "check_attention", "peak_cpu_memory"]


def draw_qkv_flow() -> Figure:
    """Self-attention's data flow with every shape: X -> W_Q, W_K, W_V -> Q, K, V -> QK^T/sqrt(d_k) -> mask ->
    softmax -> weights x V -> output. Chapter 4.

    Example: fig = draw_qkv_flow()   # a Figure; the chapter shows it, tests read its labels
    """
    d = Diagram(15.2, 6.6, title="Self-attention: one sequence in, one sequence out, no loop over positions")
    bw, bh = 1.7, 1.0                                       # box size; arrows run edge to edge
    d.box(1.1, 3.5, "X\ntokens\nT × $d_{model}$", role="embed", w=1.6, h=1.3)
    rows = {"Q": 5.5, "K": 3.5, "V": 1.3}
    for name, y in rows.items():
        d.arrow((1.9, 3.5), (2.55, y), curve=0.0)
        d.box(3.4, y, f"$W_{name}$\n$d_{{model}}$ × $d_{name.lower() if name != 'Q' else 'k'}$", w=bw, h=bh)
        d.arrow((4.25, y), (4.95, y))
        dim = "$d_v$" if name == "V" else "$d_k$"
        d.box(5.8, y, f"{name}\nT × {dim}", role="attn", w=bw, h=bh)
    d.arrow((6.65, 5.5), (7.55, 4.75))
    d.arrow((6.65, 3.5), (7.55, 4.25))
    d.box(8.5, 4.5, "$QK^\\top / \\sqrt{d_k}$\nscores, T × T", role="attn", w=1.9, h=bh)
    d.arrow((9.45, 4.5), (10.15, 4.5))
    d.box(11.0, 4.5, "mask\n(optional)\nT × T", role="plain", w=bw, h=bh + 0.2, dashed=True)
    d.arrow((11.85, 4.5), (12.55, 4.5))
    d.box(13.5, 4.5, "softmax\nper row\nT × T", role="plain", w=1.9, h=bh + 0.2)
    d.arrow((13.5, 3.9), (13.5, 1.85), text="weights", text_offset=(0.45, 0.0))
    d.arrow((6.65, 1.3), (12.55, 1.3), text="values")
    d.box(13.5, 1.3, "weights × V\noutput\nT × $d_v$", role="attn", w=1.9, h=bh + 0.1)
    d.text(8.5, 3.2, "every query against every key:\nall T × T scores at once", fontsize=8, italic=True)
    return d.figure


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
        got = returned(fn(q, k, v, m))
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
