"""The one validation idiom of the package: a few small checks that say what was expected.

Every public function and config of `book` validates its arguments with these, so a learner who passes a wrong
value reads one clear sentence ("n_heads must be a positive int, got 0") instead of a stack trace from deep inside
PyTorch. Each check returns the value it accepted, so it can be used inline:

    self.n_heads = positive_int(n_heads=n_heads)
    positive_int(d_model=d_model, n_heads=n_heads)        # several at once, returns None
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from numbers import Real
from typing import Iterator, Optional, Sequence

import torch

from .language import _

__all__ = ["positive_int", "optional_positive_int", "non_negative_int", "probability", "positive_number",
           "one_of", "divides", "token_ids", "tensor_dims", "check_shape", "inputs_checked", "values_checked",
           "returned", "pair", "allocating"]

_STATE = threading.local()


def _compiling() -> bool:
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return bool(is_compiling()) if is_compiling is not None else False


@contextmanager
def inputs_checked() -> Iterator[None]:
    """Inside, the checks that read a tensor's values (and so wait for the device: a host sync), such as token_ids'
    range and a mask's every-query-keeps-a-key, are skipped: the caller has checked those inputs once already.
    A model's public forward checks its ids at the entrance, then runs its layers inside this; `fit` runs every
    step after the first inside it (the first batch is checked, then the loop's only host sync is the loss)."""
    _STATE.depth = getattr(_STATE, "depth", 0) + 1
    try:
        yield
    finally:
        _STATE.depth -= 1


def values_checked() -> bool:
    """True inside inputs_checked() (or while torch.compile traces): skip the checks that read tensor values."""
    return _compiling() or getattr(_STATE, "depth", 0) > 0


def pair(got, what: str):
    """An exercise answer that should be two values: say so, instead of Python's unpacking error."""
    if isinstance(got, (tuple, list)) and len(got) != 2:
        raise AssertionError(_("your function should return two values {what}, got {kind} of length {n}")
                             .format(what=what, kind=type(got).__name__, n=len(got)))
    if not isinstance(got, (tuple, list)):
        raise AssertionError(_("your function should return two values {what}, got {kind}")
                             .format(what=what, kind=type(got).__name__))
    return got


def returned(got, what: Optional[str] = None):
    """An exercise checker's first look at a learner's answer: None means a forgotten `return`.
    `what` names the answer in the message; None: "your function", in the reader's language."""
    if got is None:
        raise AssertionError(_("{what} returned None: did you forget `return`? (a function without a return "
                               "statement gives None)").format(what=_("your function") if what is None else what))
    return got


def _is_int(v) -> bool:
    """An int (bools refused), or a traced size (torch.SymInt: a length while torch.export or compile traces)."""
    return (isinstance(v, int) and not isinstance(v, bool)) or isinstance(v, torch.SymInt)


def _is_number(v) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool)


def _one(fields: dict):
    return next(iter(fields.values())) if len(fields) == 1 else None


def positive_int(**fields):
    """Each keyword must be an int >= 1 (bools refused). Returns the value when given one keyword."""
    for name, v in fields.items():
        if not _is_int(v) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    return _one(fields)


def optional_positive_int(**fields):
    """Each keyword must be None or an int >= 1."""
    for name, v in fields.items():
        if v is not None and (not _is_int(v) or v < 1):
            raise ValueError(f"{name} must be a positive int or None, got {v!r}")
    return _one(fields)


def non_negative_int(**fields):
    """Each keyword must be an int >= 0."""
    for name, v in fields.items():
        if not _is_int(v) or v < 0:
            raise ValueError(f"{name} must be an int >= 0, got {v!r}")
    return _one(fields)


def probability(*, closed: bool = False, **fields):
    """Each keyword must be a number in [0, 1) (dropout, masking rates), or [0, 1] with closed=True."""
    for name, v in fields.items():
        ok = _is_number(v) and (0 <= v <= 1 if closed else 0 <= v < 1)
        if not ok:
            raise ValueError(f"{name} must lie in [0, 1{']' if closed else ')'}, got {v!r}")
    return _one(fields)


def positive_number(*, allow_zero: bool = False, **fields):
    """Each keyword must be a finite number > 0 (or >= 0 with allow_zero=True)."""
    for name, v in fields.items():
        ok = _is_number(v) and v == v and abs(v) != float("inf") and (v >= 0 if allow_zero else v > 0)
        if not ok:
            raise ValueError(f"{name} must be a number {'>= 0' if allow_zero else '> 0'}, got {v!r}")
    return _one(fields)


def one_of(choices, **fields):
    """Each keyword must be one of `choices`."""
    choices = tuple(choices)
    for name, v in fields.items():
        if v not in choices:
            raise ValueError(f"{name} must be one of {choices}, got {v!r}")
    return _one(fields)


def divides(a_name: str, a: int, b_name: str, b: int) -> None:
    """b must be divisible by a, e.g. divides("n_heads", 4, "d_model", 130) raises."""
    if b % a:
        raise ValueError(f"{b_name} must be divisible by {a_name}, got {b_name}={b} and {a_name}={a}")


def tensor_dims(t, dims, name: str = "tensor") -> torch.Tensor:
    """`t` must be a tensor with `dims` dimensions (an int or a tuple of allowed ints)."""
    allowed = (dims,) if _is_int(dims) else tuple(dims)
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() not in allowed:
        want = " or ".join(f"{d}-D" for d in allowed)
        raise ValueError(f"{name} must be {want}, got shape {tuple(t.shape)}")
    return t


def token_ids(ids, vocab_size: Optional[int] = None, name: str = "token ids") -> torch.Tensor:
    """`ids` must be an integer tensor with every id in [0, vocab_size). The range check is one device sync (one
    read of min and max): call it once, at a model's public entrance; it is skipped inside inputs_checked()."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of integer ids, got {type(ids).__name__}")
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer ids (torch.long), got dtype {ids.dtype}")
    if vocab_size is not None and ids.numel() and not values_checked():
        lo, hi = torch.stack([ids.min(), ids.max()]).tolist()     # one read of the device
        if lo < 0 or hi >= vocab_size:
            raise ValueError(f"{name} must lie in [0, {vocab_size}), got values from {lo} to {hi}")
    return ids


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


def _bytes(n: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1000


@contextmanager
def allocating(what: str, **fields) -> Iterator[None]:
    """Turn the allocator's raw failure inside the block into a MemoryError that names the argument.

    Example: with allocating("a (T, T) mask", T=T): mask = torch.ones(T, T, dtype=torch.bool)
    -> MemoryError: T=1000000 asks for 1.0 TB of memory (a (T, T) mask), more than this machine could allocate
    """
    try:
        yield
    except (RuntimeError, MemoryError) as e:     # torch.OutOfMemoryError is a RuntimeError
        text = str(e)
        if not ("can't allocate memory" in text or "out of memory" in text.lower() or isinstance(e, MemoryError)):
            raise
        asked = next((int(w) for w in text.replace(".", " ").split() if w.isdigit() and int(w) > 10**6), None)
        size = f" {_bytes(asked)}" if asked else " more"
        args = ", ".join(f"{k}={v!r}" for k, v in fields.items())
        raise MemoryError(f"{args} asks for{size} of memory ({what}), more than this machine could allocate: "
                          f"use a smaller {' or '.join(fields)}") from None
