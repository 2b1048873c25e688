"""Small helpers every chapter uses: device choice, seeding, shape checks, timing, glue.

Shape legend used across the package (batch first): B batch, T time (Tq/Tk when they differ),
C = d_model, H heads, D head dim, V vocab.
"""
from __future__ import annotations

import os
import random
import time
from contextlib import contextmanager
from typing import Iterator, Optional, Sequence

import numpy as np
import torch

__all__ = ["get_device", "seed_everything", "check_shape", "count_params", "timed", "glue"]

_DEVICES = ("cuda", "mps", "cpu")


def get_device(prefer: Optional[str] = None) -> torch.device:
    """The best available device: cuda, then mps, then cpu. Chapter 1.

    `prefer` (or the environment variable BOOK_DEVICE) forces one, e.g. "cpu" on a GPU machine
    to reproduce the committed CPU outputs.
    """
    choice = prefer or os.environ.get("BOOK_DEVICE")
    if choice:
        if choice not in _DEVICES:
            raise ValueError(f"device must be one of {_DEVICES}, got {choice!r}")
        if choice == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' was asked for, but torch.cuda.is_available() is False")
        if choice == "mps" and not torch.backends.mps.is_available():
            raise RuntimeError("device 'mps' was asked for, but this machine has no MPS backend")
        return torch.device(choice)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int = 0) -> torch.Generator:
    """Seed Python, NumPy and PyTorch (all devices); return a CPU generator seeded the same way."""
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def check_shape(t: torch.Tensor, shape: Sequence[Optional[int]], name: str = "tensor") -> torch.Tensor:
    """Raise ValueError unless `t.shape` matches `shape`; None in `shape` matches any size.

    Example: check_shape(x, (None, 5, 8), "x") accepts (2, 5, 8) and rejects (2, 8, 5).
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    ok = t.dim() == len(shape) and all(s is None or s == d for s, d in zip(shape, t.shape))
    if not ok:
        want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
        raise ValueError(f"{name} should have shape {want}, got {tuple(t.shape)}")
    return t


def count_params(model: torch.nn.Module, trainable_only: bool = True) -> int:
    """Number of (trainable) parameters of a module."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


@contextmanager
def timed() -> Iterator[dict]:
    """Wall-clock timer: `with timed() as t: ...` then `t["s"]` holds the seconds."""
    box = {"s": float("nan")}
    start = time.perf_counter()
    try:
        yield box
    finally:
        box["s"] = time.perf_counter() - start


def glue(name: str, value, display: bool = False) -> None:
    """Store `value` under `name` for the website's prose (myst-nb glue); a no-op elsewhere.

    Prose cites it as {glue:text}`name` so every number on the page comes from executed code.
    Outside a Jupyter Book environment (e.g. Colab without myst-nb) nothing is stored.
    """
    try:
        from myst_nb import glue as _glue
    except ImportError:  # pragma: no cover - exercised only where myst-nb is missing
        return None
    _glue(name, value, display=display)
