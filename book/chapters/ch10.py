"""Chapter 10, the modern GPT: the needle task and the ladder's range verdict.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..checks import optional_positive_int, positive_int
from ..results import _seed_values

__all__ = ["needle_batch", "range_verdict"]


def needle_batch(batch_size: int, seq_len: int, n_values: int = 8,
                 distance: Optional[int] = None, generator: Optional[torch.Generator] = None):
    """A needle in filler: name the one value token, k steps before the end. Chapter 10.

    Every position holds the filler token (id n_values) except one, which holds a value 0..n_values-1
    k = distance steps before the end (k = 1: the last token). The answer is that value: a model can give
    it only if its last position can see that far back (one attention layer reads it in one step).
    Returns x (B, T) ids, y (B,) answers, k (B,) distances; k is uniform in 1..T unless given.
    """
    positive_int(batch_size=batch_size, seq_len=seq_len, n_values=n_values)
    if n_values < 2:
        raise ValueError(f"need n_values >= 2 (a value and something else), got {n_values}")
    if distance is not None and optional_positive_int(distance=distance) > seq_len:
        raise ValueError(f"distance must be in 1..{seq_len} (1 = the last token), got {distance}")
    x = torch.full((batch_size, seq_len), n_values)
    y = torch.randint(0, n_values, (batch_size,), generator=generator)
    if distance is None:
        k = torch.randint(1, seq_len + 1, (batch_size,), generator=generator)
    else:
        k = torch.full((batch_size,), distance)
    x[torch.arange(batch_size), seq_len - k] = y
    return x, y, k


def range_verdict(new, old) -> str:
    """Two configurations' per-seed costs to a target (steps or seconds; None = never reached; lower is better) ->
    "pays" when every seed of `new` beats every seed of `old` (or only `new` always reaches the target), "costs" in
    the reverse case, else "within the spread". A difference counts only beyond the seeds' spread. Chapter 10."""
    new, old = _seed_values(new, "new", allow_none=True), _seed_values(old, "old", allow_none=True)
    if not new or not old:
        raise ValueError(f"need at least one seed on each side, got {len(new)} and {len(old)}")
    miss_new, miss_old = sum(v is None for v in new), sum(v is None for v in old)
    if miss_new or miss_old:
        if miss_new == 0:
            return "pays"
        if miss_old == 0:
            return "costs"
        return "within the spread"
    if max(new) < min(old):
        return "pays"
    if min(new) > max(old):
        return "costs"
    return "within the spread"
