"""Training and evaluating language models on token streams, and the running leaderboard.

Shape legend: B batch, T time (context_len), V vocab. A language model here is any module with
forward(idx (B, T)) -> logits (B, T, V). Chapters 1, 2, 6, 7.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple

import torch
import torch.nn.functional as F

from .data import get_batch
from .utils import step_budget

__all__ = ["nats_to_bits", "lm_loss", "evaluate_lm", "train_lm", "History", "warmup_cosine",
           "leaderboard_row", "LEADERBOARD_MIME", "check_bits_per_char"]

LEADERBOARD_MIME = "application/vnd.book.leaderboard+json"


def nats_to_bits(nats: float) -> float:
    """Convert a cross-entropy in nats to bits (divide by ln 2)."""
    return nats / math.log(2)


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy (nats) of logits (B, T, V) against targets (B, T)."""
    if logits.dim() != 3 or logits.shape[:2] != targets.shape:
        raise ValueError(f"logits should be (B, T, V) and targets (B, T); got {tuple(logits.shape)} "
                         f"and {tuple(targets.shape)}")
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def _logits(model, x):
    out = model(x)
    return out[0] if isinstance(out, tuple) else out


@torch.no_grad()
def evaluate_lm(model, data: torch.Tensor, batch_size: int, context_len: int, n_batches: int,
                generator: Optional[torch.Generator] = None, device=None) -> float:
    """Mean cross-entropy in nats over `n_batches` random windows of `data` (seeded by `generator`)."""
    if n_batches < 1:
        raise ValueError(f"n_batches must be >= 1, got {n_batches}")
    generator = generator if generator is not None else torch.Generator().manual_seed(1234)
    was_training = model.training
    model.eval()
    total = 0.0
    for _ in range(n_batches):
        x, y = get_batch(data, batch_size, context_len, generator, device)
        total += lm_loss(_logits(model, x), y).item()
    model.train(was_training)
    return total / n_batches


def warmup_cosine(step: int, total_steps: int, warmup: int, lr_max: float, lr_min: float) -> float:
    """Learning rate at `step`: linear warmup to lr_max, then cosine decay to lr_min. Chapter 7."""
    if step < warmup:
        return lr_max * (step + 1) / warmup
    if step >= total_steps:
        return lr_min
    progress = (step - warmup) / max(1, total_steps - warmup)
    return lr_min + 0.5 * (1 + math.cos(math.pi * progress)) * (lr_max - lr_min)


@dataclass
class History:
    """What a training run leaves: per-step train loss, (step, val loss) points, seconds of training."""
    train_loss: List[float] = field(default_factory=list)
    val: List[Tuple[int, float]] = field(default_factory=list)
    train_seconds: float = 0.0

    @property
    def final_val(self) -> float:
        return self.val[-1][1] if self.val else float("nan")


def train_lm(model, train_data: torch.Tensor, val_data: torch.Tensor, *, steps: int, batch_size: int,
             context_len: int, lr: float = 1e-3, optimizer=None, eval_every: int = 0, eval_batches: int = 20,
             generator: Optional[torch.Generator] = None, device=None, progress: bool = True,
             lr_schedule: Optional[Callable[[int], float]] = None, grad_clip: Optional[float] = None,
             desc: str = "training") -> History:
    """Train `model` on random windows with AdamW (or `optimizer`); return its History.

    Validation loss is measured every `eval_every` steps (0: only at the end) on `eval_batches`
    fixed windows; evaluation time is not counted in History.train_seconds.
    """
    import time
    from tqdm.auto import tqdm

    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    steps = step_budget(steps)   # BOOK_MAX_STEPS: a smoke run of the code path
    optimizer = optimizer or torch.optim.AdamW(model.parameters(), lr=lr)
    generator = generator if generator is not None else torch.Generator().manual_seed(0)
    hist = History()
    model.train()
    bar = tqdm(range(steps), desc=desc, disable=not progress, mininterval=1.0)
    for step in bar:
        t0 = time.perf_counter()
        if lr_schedule is not None:
            for group in optimizer.param_groups:
                group["lr"] = lr_schedule(step)
        x, y = get_batch(train_data, batch_size, context_len, generator, device)
        loss = lm_loss(_logits(model, x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        hist.train_seconds += time.perf_counter() - t0
        hist.train_loss.append(loss.item())
        last = step == steps - 1
        if last or (eval_every and (step + 1) % eval_every == 0):
            v = evaluate_lm(model, val_data, batch_size, context_len, eval_batches, device=device)
            hist.val.append((step + 1, v))
            bar.set_postfix(train=f"{hist.train_loss[-1]:.3f}", val=f"{v:.3f}")
    return hist


class _Row:
    """A leaderboard row that shows as text/markdown and carries JSON for the executor to collect."""

    def __init__(self, row: dict):
        self.row = row

    def _repr_mimebundle_(self, include=None, exclude=None):
        r = self.row
        text = f"leaderboard | {r['chapter']} | {r['name']} | val {r['val_bpc']:.3f} bits/char | {r['params']:,} params"
        md = (f"| chapter | model | val bits/char | parameters | train time (s) |\n|---|---|---|---|---|\n"
              f"| {r['chapter']} | {r['name']} | {r['val_bpc']:.3f} | {r['params']:,} | {r['train_s']:.1f} |")
        return {"text/plain": text, "text/markdown": md, LEADERBOARD_MIME: json.loads(json.dumps(r))}


def leaderboard_row(name: str, chapter: int, val_bpc: float, params: int, train_s: float):
    """Display one leaderboard row (make it the last expression of a cell)."""
    if not (isinstance(val_bpc, (int, float)) and math.isfinite(val_bpc) and val_bpc > 0):
        raise ValueError(f"val_bpc must be a positive finite number, got {val_bpc!r}")
    return _Row({"name": name, "chapter": int(chapter), "val_bpc": round(float(val_bpc), 4),
                 "params": int(params), "train_s": round(float(train_s), 1)})


def check_bits_per_char(fn) -> bool:
    """Self-check for the Chapter 1 exercise: fn(probs) -> mean -log2 p over the true next characters."""
    cases = [[0.5, 0.5], [1.0, 0.25, 0.125], [1 / 65] * 7, [0.9]]
    for probs in cases:
        want = sum(-math.log2(p) for p in probs) / len(probs)
        got = fn(torch.tensor(probs))
        got = got.item() if isinstance(got, torch.Tensor) else got
        if not isinstance(got, (int, float)) or abs(got - want) > 1e-5:
            raise AssertionError(f"for probabilities {probs}: expected {want:.4f} bits, got {got!r}. "
                                 "Hint: average -log2(p), not -ln(p), and not the sum.")
    print("Correct: your bits-per-character matches the reference on every case.")
    return True
