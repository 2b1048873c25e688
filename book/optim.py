"""How the book updates parameters: the one training loop `fit`, its learning-rate schedules, the one
optimizer builder, and the Muon optimizer written out. Chapters 6, 7 and 10.

`fit` (re-exported by book.train, where the chapters find it) runs every training loop of the book after
chapter 1's hand-written one: batch -> learning rate -> utils.train_step -> time -> evaluation -> progress bar.
It sits this low in the package so that the trainers of the recurrent models (book.rnn, book.seq2seq) can use
it too. A schedule gives a multiplier per step; each parameter group runs at its own peak rate (the rate it
was built with, kept as group["peak_lr"]) times that multiplier, so Muon's groups and AdamW's scale alike.
The default schedule is warmup_cosine (nanoGPT's); chapter 10 teaches warmup_stable_decay ("wsd").

Muon (Jordan et al. 2024; used by modded-nanoGPT, Kimi K2) treats a weight matrix as a matrix: it takes

the momentum of the gradient and replaces it by the nearest semi-orthogonal matrix (all singular values
pushed towards 1), computed by a few Newton-Schulz iterations instead of an SVD. Every direction of
the update then moves by about the same amount, however lopsided the gradient's spectrum is.
It is only for 2-D hidden matrices; embeddings, the output head and the norms' gains keep AdamW.

`newton_schulz` and `Muon` follow torch.optim.Muon (PyTorch >= 2.9) step for step, so tests can check them
against it; ours runs the iteration in float32 (PyTorch's in bfloat16, which is slow on many CPUs) and works
with any torch the book supports. `Optimizers` steps several optimizers as one (Muon + AdamW).

`build_optimizer` is the one place the book builds an optimizer ("adamw", "muon" or "adam"); every AdamW in it
decays matrices only (book.utils.adamw, the one weight-decay split).
"""
from __future__ import annotations

import contextlib
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F

from .checks import (inputs_checked, non_negative_int, one_of, optional_positive_int, positive_int, positive_number,
                     probability)
from .utils import Diverged, _betas, adamw, step_budget, train_step

__all__ = ["NS_COEFFICIENTS", "newton_schulz", "Muon", "Optimizers", "muon_adamw", "build_optimizer",
           "OPTIMIZERS", "warmup_cosine", "warmup_stable_decay", "SCHEDULES", "schedule_multiplier", "History",
           "fit", "Diverged", "NONFINITE"]

OPTIMIZERS = ("adamw", "muon", "adam")

NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)   # the quintic's a, b, c (Jordan et al.): steep slope at 0


def newton_schulz(g: torch.Tensor, steps: int = 5, coefficients: Sequence[float] = NS_COEFFICIENTS,
                  eps: float = 1e-7, dtype=torch.float32) -> torch.Tensor:
    """Approximately orthogonalise a matrix: U S V^T -> U S' V^T with every S'_ii near 1 (about 0.7-1.2).

    X = G / ||G||_F (so every singular value is at most 1), then `steps` times X <- aX + b(XX^T)X + c(XX^T)^2 X:
    a polynomial in X that maps each singular value s to a s + b s^3 + c s^5, pushing it towards 1.
    Works on the wide orientation (rows <= cols) so X X^T is the small Gram matrix.
    """
    if not isinstance(g, torch.Tensor) or g.dim() != 2:
        raise ValueError(f"newton_schulz needs a 2-D matrix, got {getattr(g, 'shape', type(g).__name__)}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r}")
    a, b, c = coefficients
    x = g.to(dtype)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T                               # (rows, rows)
        x = a * x + (b * gram + c * gram @ gram) @ x
    return (x.T if tall else x).to(g.dtype)


class Muon(torch.optim.Optimizer):
    """Momentum + Newton-Schulz orthogonalisation for 2-D parameters (torch.optim.Muon's update).

    For each matrix W (rows A, cols B) with gradient G:
        buf <- momentum * buf + (1 - momentum) * G
        u   <- (1 - momentum) * G + momentum * buf   (Nesterov; buf itself without)
        W   <- W * (1 - lr * weight_decay) - lr * sqrt(max(1, A / B)) * newton_schulz(u)
    """

    def __init__(self, params, lr: float = 0.02, weight_decay: float = 0.0, momentum: float = 0.95,
                 nesterov: bool = True, ns_steps: int = 5):
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum must lie in [0, 1), got {momentum}")
        if not weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                                      ns_steps=ns_steps))
        for group in self.param_groups:
            for p in group["params"]:
                if p.dim() != 2:
                    raise ValueError(f"Muon is for 2-D matrices; give this {p.dim()}-D parameter of shape "
                                     f"{tuple(p.shape)} to AdamW (see book.optim.muon_adamw)")

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            lr, mom = group["lr"], group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                buf = state["momentum_buffer"]
                buf.lerp_(p.grad, 1 - mom)
                u = p.grad.lerp(buf, mom) if group["nesterov"] else buf
                update = newton_schulz(u, group["ns_steps"])
                p.mul_(1 - lr * group["weight_decay"])
                p.add_(update, alpha=-lr * math.sqrt(max(1.0, p.shape[0] / p.shape[1])))
        return loss


class Optimizers:
    """Several optimizers stepped as one (e.g. Muon for matrices, AdamW for the rest).

    param_groups lists every group of every optimizer, so a schedule that sets group["lr"] reaches all;
    each group remembers its starting rate as group["peak_lr"] for schedules that scale it.
    """

    def __init__(self, optimizers: Sequence[torch.optim.Optimizer]):
        if not optimizers:
            raise ValueError("Optimizers needs at least one optimizer")
        self.optimizers: List[torch.optim.Optimizer] = list(optimizers)
        for group in self.param_groups:
            group.setdefault("peak_lr", group["lr"])

    @property
    def param_groups(self) -> list:
        return [g for opt in self.optimizers for g in opt.param_groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        for opt in self.optimizers:
            opt.step()

    def state_dict(self) -> list:
        return [opt.state_dict() for opt in self.optimizers]


def muon_adamw(model: torch.nn.Module, lr: float, muon_lr: float, weight_decay: float = 0.0,
               betas=(0.9, 0.99), momentum: float = 0.95) -> Optimizers:
    """Muon for the hidden 2-D matrices, AdamW (lr) for embeddings, the output head and 1-D gains/biases.

    "Hidden" = every 2-D parameter except those whose name contains "emb" or "lm_head" (token in, token out).
    The AdamW part is book.utils.adamw: of its parameters, only the matrices decay."""
    seen, hidden, other = set(), [], []
    for name, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:
            continue   # tied weights appear once
        seen.add(id(p))
        (hidden if p.dim() == 2 and "emb" not in name and "lm_head" not in name else other).append(p)
    opts = [Muon(hidden, lr=muon_lr, weight_decay=weight_decay, momentum=momentum)] if hidden else []
    opts.append(adamw(other, lr, weight_decay, betas))
    return Optimizers(opts)


def build_optimizer(model: torch.nn.Module, name: str = "adamw", *, lr: float,
                    weight_decay: Optional[float] = None, betas: Optional[Tuple[float, float]] = None,
                    muon_lr: float = 0.02, momentum: float = 0.95):
    """The book's one optimizer builder. Chapters 1-10.

    "adamw": AdamW, weight decay (default 0.1) on the matrices (dim >= 2) only, never on norms' gains or biases
             (nanoGPT's split, book.utils.adamw); betas default (0.9, 0.99);
    "muon":  Muon (muon_lr) for the hidden matrices, AdamW (lr) as above for the rest (muon_adamw);
    "adam":  plain Adam, no weight decay, PyTorch's betas (0.9, 0.999), every other setting PyTorch's default
             (eps, foreach, fused): the small models of chapters 1-6. It is torch.optim.Adam(model.parameters(),
             lr=lr) step for step (tests/test_fit.py), over the parameters that require a gradient.
    A schedule (fit) scales every group's rate relative to the rate it starts with.
    """
    one_of(OPTIMIZERS, name=name)
    positive_number(lr=lr)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError(f"model has no trainable parameters: nothing for the optimizer to update "
                         f"({type(model).__name__})")
    _betas(betas)
    if name == "adam":
        if weight_decay:
            raise ValueError(f"'adam' takes no weight decay (Adam's would be an L2 penalty): use 'adamw', "
                             f"got weight_decay={weight_decay}")
        return torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr,
                                betas=betas or (0.9, 0.999))
    weight_decay = 0.1 if weight_decay is None else positive_number(weight_decay=weight_decay, allow_zero=True)
    betas = betas or (0.9, 0.99)
    if name == "muon":
        return muon_adamw(model, lr, positive_number(muon_lr=muon_lr), weight_decay, betas, momentum)
    return adamw(model, lr, weight_decay, betas)


# ---- learning-rate schedules: the maths of chapters 6 and 10 ----

def _warmup_or_end(step: int, total_steps: int, warmup: int, lr_max: float, lr_min: float) -> Optional[float]:
    """The part every schedule shares: linear warmup lr_max * (step + 1) / (warmup + 1) during the first
    `warmup` steps (nanoGPT's), lr_min from total_steps on; None in between (the schedule's own shape)."""
    if step < 0:
        raise ValueError(f"step must be >= 0 (0-based), got {step}")
    if lr_min > lr_max:
        raise ValueError(f"lr_min must be <= lr_max (the schedule decays), got lr_min={lr_min} and lr_max={lr_max}")
    if step < warmup:
        return lr_max * (step + 1) / (warmup + 1)
    if step >= total_steps:
        return lr_min
    return None


def warmup_cosine(step: int, total_steps: int, warmup: int, lr_max: float, lr_min: float) -> float:
    """Learning rate at `step` (0-based): linear warmup to lr_max, then cosine decay to lr_min. Chapter 6.

    nanoGPT's get_lr, exactly: during warmup lr_max * (step + 1) / (warmup + 1); from step total_steps on,
    lr_min. The book's default schedule (fit's "warmup_cosine"; GPTRecipe.lr_at).
    """
    edge = _warmup_or_end(step, total_steps, warmup, lr_max, lr_min)
    if edge is not None:
        return edge
    progress = (step - warmup) / max(1, total_steps - warmup)
    return lr_min + 0.5 * (1 + math.cos(math.pi * progress)) * (lr_max - lr_min)


def warmup_stable_decay(step: int, total_steps: int, warmup: int, lr_max: float, lr_min: float,
                        decay_frac: float = 0.3) -> float:
    """Learning rate at `step`: linear warmup, then flat at lr_max, then a linear decay to lr_min over the
    last `decay_frac` of the steps (WSD, Hu et al. 2024 MiniCPM; modded-nanoGPT). Chapter 10 (fit's "wsd").

    Unlike a cosine, the rate stays high for most of the run, and the run can be extended (or stopped
    early with a short decay) without knowing its length at the start."""
    if not 0 < decay_frac <= 1:
        raise ValueError(f"decay_frac must lie in (0, 1], got {decay_frac}")
    edge = _warmup_or_end(step, total_steps, warmup, lr_max, lr_min)
    if edge is not None:
        return edge
    decay_start = total_steps - int(decay_frac * total_steps)
    if step < decay_start:
        return lr_max
    progress = (step - decay_start) / max(1, total_steps - decay_start)
    return lr_max + progress * (lr_min - lr_max)


SCHEDULES = ("warmup_cosine", "wsd", "constant")


def schedule_multiplier(schedule: Union[str, Callable[[int], float]], steps: Optional[int], warmup: int = 0,
                        min_lr_ratio: float = 0.1, decay_frac: float = 0.3) -> Callable[[int], float]:
    """step -> the factor on every group's peak rate. `schedule`: "warmup_cosine" (decays to min_lr_ratio
    over `steps`), "wsd" (warmup_stable_decay), "constant" (1 after the warmup), or a callable step -> factor."""
    if callable(schedule):
        return schedule
    one_of(SCHEDULES, schedule=schedule)
    non_negative_int(warmup=warmup)
    probability(min_lr_ratio=min_lr_ratio, closed=True)
    if schedule == "constant":
        return lambda step: _warmup_or_end(step, math.inf, warmup, 1.0, 1.0) or 1.0
    if steps is None:
        raise ValueError(f"schedule {schedule!r} decays over the run's length: give steps, or use 'constant'")
    if schedule == "wsd":
        return lambda step: warmup_stable_decay(step, steps, warmup, 1.0, min_lr_ratio, decay_frac)
    return lambda step: warmup_cosine(step, steps, warmup, 1.0, min_lr_ratio)


# ---- the one training loop ----

@dataclass
class History:
    """What a training run leaves: per-step train loss, (step, eval value) points, seconds of training (the
    steps only, never evaluation), and the number of steps run."""
    train_loss: List[float] = field(default_factory=list)
    val: List[Tuple[int, float]] = field(default_factory=list)
    train_seconds: float = 0.0
    steps: int = 0
    diverged: Optional[int] = None     # the step whose loss was not finite (fit with on_nonfinite="stop"), or None

    @property
    def final_val(self) -> float:
        return self.val[-1][1] if self.val else float("nan")


def _next_token_loss(model, batch) -> torch.Tensor:
    """The default loss: batch (x (B, T), y (B, T)) -> mean cross-entropy of model(x)'s logits against y."""
    x, y = batch
    out = model(x)
    logits = out[0] if isinstance(out, tuple) else out
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))


NONFINITE = ("raise", "stop", "continue")


def _own_parameters(model: torch.nn.Module, groups) -> None:
    """Every parameter the optimizer updates must be one of the model's: an optimizer built for another model
    would step that model's weights while this one never changes."""
    own = {id(p) for p in model.parameters()}
    for group in groups:
        for p in group["params"]:
            if id(p) not in own:
                raise ValueError(f"optimizer holds a parameter of shape {tuple(p.shape)} that is not one of "
                                 f"{type(model).__name__}'s: build the optimizer on this model "
                                 "(build_optimizer(model, ...)), not on another")


def fit(model: torch.nn.Module, batches, *, optimizer, loss_fn: Optional[Callable] = None,
        steps: Optional[int] = None, time_budget: Optional[float] = None,
        schedule: Union[str, Callable[[int], float]] = "warmup_cosine", warmup: int = 0, min_lr_ratio: float = 0.1,
        decay_frac: float = 0.3, grad_clip: Optional[float] = None, eval_fn: Optional[Callable] = None,
        eval_every: Optional[int] = None, start: int = 0, stop: Optional[int] = None,
        history: Optional[History] = None, progress: bool = True, desc: str = "training",
        on_nonfinite: str = "raise") -> History:
    """Train `model`: the one training loop of the book. Returns its History. Chapters 2-10.

    batches: a callable () -> batch, or an iterable of batches; loss_fn(model, batch) -> scalar loss
      (default: batch = (x, y) and the cross-entropy of model(x)'s logits against y).
    optimizer: any torch optimizer or book.optim.Optimizers (build_optimizer builds the book's).
    steps: the schedule's length; the run stops after step_budget(steps) (BOOK_MAX_STEPS caps it), at `stop`
      (exclusive) if given, or when `time_budget` seconds of training have passed. steps=None needs a
      time_budget and a schedule that does not decay over a length ("constant" or a callable).
    schedule: "warmup_cosine" (default; decays to min_lr_ratio of the peak), "wsd", "constant", or a callable
      step -> factor. Every parameter group runs at group["peak_lr"] (its starting rate, recorded on the
      first call) times the factor.
    start: the schedule's step to begin at, with `history` to append to: a run advanced in chunks.
    eval_fn(model) -> a value (a float, or anything), called in eval mode (then back to train mode) every
      `eval_every` steps and after the last step; the values go to History.val as (steps done, value), untimed.
    on_nonfinite: what a NaN or inf training loss does (a diverged run). "raise" (default): raise
      book.optim.Diverged naming the step, with the History so far (its .history; the non-finite loss is its last
      entry); "stop": end the run there and return the History with History.diverged = that step (a rate sweep's
      way to record a diverged run); "continue": train on, as before this check existed.
    The optimizer must hold only the model's parameters (one built for another model would train nothing).
    One host sync per step: the loss read for History.
    """
    if steps is not None:
        positive_int(steps=steps)
    optional_positive_int(eval_every=eval_every)
    non_negative_int(start=start)
    if time_budget is not None:
        positive_number(time_budget=time_budget, allow_zero=True)
    elif steps is None:
        raise ValueError("fit needs steps, a time_budget, or both")
    one_of(NONFINITE, on_nonfinite=on_nonfinite)
    factor = schedule_multiplier(schedule, steps, warmup, min_lr_ratio, decay_frac)
    end = step_budget(steps if steps is not None else sys.maxsize)     # BOOK_MAX_STEPS: a smoke run
    if stop is not None:
        end = min(end, positive_int(stop=stop))
    loss_fn = loss_fn or _next_token_loss
    next_batch = batches if callable(batches) else iter(batches).__next__
    hist = history if history is not None else History()
    groups = optimizer.param_groups
    _own_parameters(model, groups)
    for group in groups:
        group.setdefault("peak_lr", group["lr"])
    from tqdm.auto import tqdm

    bar = tqdm(total=None if steps is None else end - start, desc=desc, disable=not progress, mininterval=1.0)
    spent, step = 0.0, start

    def evaluate():
        model.eval()
        try:
            hist.val.append((step, eval_fn(model)))
        finally:
            model.train()
        value = hist.val[-1][1]             # any value eval_fn returns; a number is shown in the bar
        bar.set_postfix(train=f"{hist.train_loss[-1]:.3f}",
                        val=f"{value:.3f}" if isinstance(value, (int, float)) else str(value)[:40])

    model.train()
    while step < end and (time_budget is None or spent < time_budget):
        t0 = time.perf_counter()
        f = factor(step)
        for group in groups:
            group["lr"] = group["peak_lr"] * f
        try:
            batch = next_batch()
        except StopIteration:          # an iterable of batches ran out: the run ends here
            break
        with inputs_checked() if step > 0 else contextlib.nullcontext():   # the first batch's ids are checked;
            batch_loss = loss_fn(model, batch)                                # then no check syncs with the device
        loss = train_step(optimizer, batch_loss, model.parameters(), grad_clip, check_finite=False)
        spent += time.perf_counter() - t0
        hist.train_loss.append(loss)
        step += 1
        bar.update(1)
        if on_nonfinite != "continue" and not math.isfinite(loss):
            hist.diverged = step - 1
            if on_nonfinite == "stop":
                break
            bar.close()
            hist.train_seconds += spent
            hist.steps += step - start
            raise Diverged(f"training diverged at step {step - 1}: the loss is {loss} (a learning rate too high? "
                           f"the rate was {groups[0]['lr']:.3g}). The partial History is this exception's .history;"
                           " fit(..., on_nonfinite='stop') returns it instead", step=step - 1, loss=loss, history=hist)
        if eval_fn is not None and eval_every and step % eval_every == 0:
            evaluate()
        elif step % 50 == 0:
            bar.set_postfix(train=f"{loss:.3f}")
    if eval_fn is not None and step > start and (not hist.val or hist.val[-1][0] != step):
        evaluate()                     # after the last step
    bar.close()
    hist.train_seconds += spent
    hist.steps += step - start
    return hist
