"""Training and evaluating language models on token streams, GPT recipes and their race, the leaderboard.

Shape legend: B batch, T time (context_len), V vocab. A language model here is any module with
forward(idx (B, T)) -> logits (B, T, V). Chapters 1, 2, 6, 7. Training sits on top of the models: it
imports them, they never import it. Every trainer of the book is a thin wrapper that builds batches and an
optimizer (book.optim.build_optimizer) and calls the one training loop, `fit` (written in book.optim, so the
recurrent models' trainers below this layer use it too, and re-exported here). fit's default schedule is
warmup_cosine; chapter 10 adds warmup_stable_decay ("wsd"); a few small models keep a constant rate.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from numbers import Real
from typing import List, Optional

import torch

from .data import get_batch
from .checks import non_negative_int, one_of, positive_int
from .gpt import GPT, GPTConfig, lm_loss
from .optim import NONFINITE, Diverged, History, build_optimizer, fit, warmup_cosine, warmup_stable_decay
from .utils import step_budget

__all__ = ["nats_to_bits", "lm_loss", "evaluate_lm", "fit", "train_lm", "History", "Diverged", "warmup_cosine",
           "warmup_stable_decay",
           "leaderboard_row", "LEADERBOARD_MIME", "GPTRecipe", "NANOGPT_CPU",
           "NANOGPT_CPU_FINAL_VAL", "COURSE_CPU", "NANOGPT_GPU", "RecipeRun", "race", "time_to"]

LEADERBOARD_MIME = "application/vnd.book.leaderboard+json"


def nats_to_bits(nats: float) -> float:
    """Convert a cross-entropy in nats to bits (divide by ln 2)."""
    return nats / math.log(2)


def _logits(model, x):
    out = model(x)
    return out[0] if isinstance(out, tuple) else out


@torch.no_grad()
def evaluate_lm(model, data: torch.Tensor, batch_size: int, context_len: int, n_batches: int,
                generator: Optional[torch.Generator] = None, device=None) -> float:
    """Mean cross-entropy in nats over `n_batches` random windows of `data` (seeded by `generator`).
    The model is evaluated in eval mode and left in the mode it came in, even when it raises."""
    positive_int(n_batches=n_batches)
    n_batches = step_budget(n_batches)   # BOOK_MAX_STEPS: a smoke run evaluates only a few batches
    generator = generator if generator is not None else torch.Generator().manual_seed(1234)
    was_training = model.training
    model.eval()
    try:
        total = 0.0
        for _ in range(n_batches):
            x, y = get_batch(data, batch_size, context_len, generator, device)
            total += lm_loss(_logits(model, x), y).item()
    finally:
        model.train(was_training)
    return total / n_batches


def train_lm(model, train_data: torch.Tensor, val_data: torch.Tensor, *, steps: int, batch_size: int,
             context_len: int, lr: float = 1e-3, optimizer=None, schedule="warmup_cosine", warmup: int = 0,
             min_lr_ratio: float = 0.1, eval_every: int = 0, eval_batches: int = 20,
             generator: Optional[torch.Generator] = None, device=None, progress: bool = True,
             grad_clip: Optional[float] = None, desc: str = "training", on_nonfinite: str = "raise") -> History:
    """Train a language model on random windows of `train_data` with `fit`; return its History.

    The optimizer is `optimizer`, or AdamW at `lr` that decays the matrices only (weight decay 0.01, betas
    0.9/0.999). `schedule` scales every group's rate (fit: "warmup_cosine", "wsd", "constant" or a callable
    step -> factor). Validation loss is measured every `eval_every` steps (0: only at the end) on
    `eval_batches` fixed windows; evaluation time is not counted in History.train_seconds. A NaN or inf loss
    raises book.optim.Diverged naming the step (on_nonfinite="stop": return the History marked diverged; fit).
    """
    positive_int(steps=steps)
    non_negative_int(eval_every=eval_every)
    optimizer = optimizer or build_optimizer(model, "adamw", lr=lr, weight_decay=0.01, betas=(0.9, 0.999))
    generator = generator if generator is not None else torch.Generator().manual_seed(0)
    return fit(model, lambda: get_batch(train_data, batch_size, context_len, generator, device),
               loss_fn=lambda m, b: lm_loss(_logits(m, b[0]), b[1]), optimizer=optimizer, steps=steps,
               schedule=schedule, warmup=warmup, min_lr_ratio=min_lr_ratio, grad_clip=grad_clip,
               eval_fn=lambda m: evaluate_lm(m, val_data, batch_size, context_len, eval_batches, device=device),
               eval_every=eval_every or None, progress=progress, desc=desc, on_nonfinite=on_nonfinite)


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
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    for what, v, low in (("chapter", chapter, 0), ("params", params, 0), ("train_s", train_s, 0)):   # 0: the intro
        if isinstance(v, bool) or not isinstance(v, Real) or not (math.isfinite(v) and v >= low):
            raise ValueError(f"{what} must be a finite number >= {low}, got {v!r}")
    return _Row({"name": name, "chapter": int(chapter), "val_bpc": round(float(val_bpc), 4),
                 "params": int(params), "train_s": round(float(train_s), 1)})


@dataclass
class GPTRecipe:
    """How to train a character GPT: model sizes, batch, schedule, optimiser. Chapters 7 and 10.

    The learning rate warms up linearly for `warmup` steps, then (schedule="cosine", chapter 7) follows a
    cosine from lr to min_lr over the remaining steps (nanoGPT's get_lr, exactly), or (schedule="wsd",
    chapter 10) stays at lr and decays linearly over the last decay_frac of the steps. optimizer="adamw":
    AdamW, which decays matrices only; "muon": Muon (muon_lr) for the hidden matrices and AdamW for the rest.
    Every group follows the schedule relative to its own peak rate (book.optim.fit).
    """
    name: str
    n_layers: int = 4
    n_heads: int = 4
    d_model: int = 128
    context_len: int = 64
    batch_size: int = 12
    steps: int = 2000
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup: int = 100
    weight_decay: float = 0.1
    beta2: float = 0.99
    grad_clip: float = 1.0
    dropout: float = 0.0
    # Chapter 10: the model's modern options (GPTConfig's names; defaults = Chapter 7) and the optimiser's
    bias: bool = False
    positions: str = "learned"
    norm: str = "layer"
    activation: str = "gelu"
    qk_norm: bool = False
    tie_weights: bool = True
    zero_init: bool = False
    logit_softcap: Optional[float] = None
    optimizer: str = "adamw"      # or "muon": Muon for hidden matrices at muon_lr, AdamW (lr) for the rest
    muon_lr: float = 0.02
    schedule: str = "cosine"      # or "wsd": warmup, stable, then linear decay over the last decay_frac
    # "cosine" is fit's "warmup_cosine" (lr_at). The name stays: dataclasses.asdict of the recipe is recorded in
    # book/results/speedrun_*.json and live/ch07_gpt.json (and its repr in gpt_time_to_loss.txt), and
    # tests/test_speedrun.py and tests/test_live_export.py compare those records with today's recipes.
    decay_frac: float = 0.3
    # speed only, not the maths: RecipeRun trains through torch.compile(model), compiled (and warmed up, untimed)
    # before the first step; evaluation and the model it hands back stay eager. Chapter 10's speedrun.
    compile: bool = False

    def __post_init__(self):
        def number(name):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
            return v

        if not isinstance(self.name, str):
            raise ValueError(f"name must be a string (the recipe's label), got {self.name!r}")
        for name in ("n_layers", "n_heads", "d_model", "context_len", "batch_size", "steps"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if not isinstance(self.warmup, int) or isinstance(self.warmup, bool) or self.warmup < 0:
            raise ValueError(f"warmup must be an int >= 0 (steps), got {self.warmup!r}")
        if not number("lr") > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0 <= number("min_lr") <= self.lr:
            raise ValueError(f"min_lr must lie in [0, lr={self.lr}], got {self.min_lr}")
        if not number("weight_decay") >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if not 0 <= number("beta2") < 1:
            raise ValueError(f"beta2 must lie in [0, 1), got {self.beta2}")
        if not number("grad_clip") > 0:
            raise ValueError(f"grad_clip must be > 0, got {self.grad_clip}")
        if not 0 <= number("dropout") < 1:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model must be divisible by n_heads, got {self.d_model} and {self.n_heads}")
        if self.optimizer not in ("adamw", "muon"):
            raise ValueError(f"optimizer must be 'adamw' or 'muon', got {self.optimizer!r}")
        if self.schedule not in ("cosine", "wsd"):
            raise ValueError(f"schedule must be 'cosine' or 'wsd', got {self.schedule!r}")
        if not number("muon_lr") > 0:
            raise ValueError(f"muon_lr must be > 0, got {self.muon_lr}")
        if not 0 < number("decay_frac") <= 1:
            raise ValueError(f"decay_frac must lie in (0, 1], got {self.decay_frac}")
        if not isinstance(self.compile, bool):
            raise ValueError(f"compile must be True or False, got {self.compile!r}")
        self.config(65)   # the model options are checked by GPTConfig, with its messages

    def config(self, vocab_size: int) -> GPTConfig:
        return GPTConfig(vocab_size, self.context_len, self.d_model, self.n_heads, self.n_layers,
                         dropout=self.dropout, bias=self.bias, positions=self.positions, norm=self.norm,
                         activation=self.activation, qk_norm=self.qk_norm, tie_weights=self.tie_weights,
                         zero_init=self.zero_init, logit_softcap=self.logit_softcap)

    def lr_at(self, step: int) -> float:
        """AdamW's learning rate at `step` (0-based): warmup_cosine (or warmup_stable_decay) over the steps."""
        if self.schedule == "wsd":
            return warmup_stable_decay(step, self.steps, self.warmup, self.lr, self.min_lr, self.decay_frac)
        return warmup_cosine(step, self.steps, self.warmup, self.lr, self.min_lr)

    def lr_factor(self, step: int) -> float:
        """lr_at(step) / lr: the factor fit applies to every group's peak rate (Muon's groups included)."""
        return self.lr_at(step) / self.lr

    def make_optimizer(self, model: GPT):
        """AdamW on the model, matrices decayed (Chapter 7), or Muon on hidden matrices + AdamW on the rest
        (Chapter 10): book.optim.build_optimizer."""
        return build_optimizer(model, self.optimizer, lr=self.lr, weight_decay=self.weight_decay,
                               betas=(0.9, self.beta2), muon_lr=self.muon_lr)

    @property
    def tokens(self) -> int:
        return self.steps * self.batch_size * self.context_len


# nanoGPT's "I only have a MacBook" run on shakespeare_char (README): val loss about 1.88 after 2000 steps.
NANOGPT_CPU = GPTRecipe("nanoGPT CPU recipe")
NANOGPT_CPU_FINAL_VAL = 1.8857  # its validation loss (nats) after those 2000 steps, the course's target
# The course's recipe: a higher peak rate with a short warmup, half the depth, a bigger batch, and a schedule
# as long as the budget (600 steps reach nanoGPT's final loss; Chapter 7 gives it 2000).
COURSE_CPU = GPTRecipe("course recipe", n_layers=2, batch_size=32, steps=600, lr=8e-3, min_lr=8e-4, warmup=30)
# Chapter 10's recipe: the course recipe with today's changes (RMSNorm, SwiGLU, RoPE, QK-norm, untied head,
# zero-initialised projections, soft-capped logits, Muon for hidden matrices) on a 300-step cosine: the course
# speedrun's standing record on the time track (benchmarks/speedrun, entry cosine300-compiled, which trains it
# through torch.compile). Chapter 10's ladder measures each change with 3 seeds and a rate sweep
# (book/results/modern_ladder.csv); its last rung, warmup-stable-decay over 600 steps, did not pay there.
MODERN_CPU = GPTRecipe("modern recipe", n_layers=2, batch_size=32, steps=300, lr=8e-3, min_lr=8e-4, warmup=10,
                       weight_decay=0.0, positions="rope", norm="rms", activation="swiglu", qk_norm=True,
                       tie_weights=False, zero_init=True, logit_softcap=15.0, optimizer="muon", muon_lr=0.05,
                       schedule="cosine")
# nanoGPT's GPU run on shakespeare_char (about 3 min on an A100 to val 1.47).
NANOGPT_GPU = GPTRecipe("nanoGPT GPU recipe", n_layers=6, n_heads=6, d_model=384, context_len=256,
                        batch_size=64, steps=5000, warmup=100, dropout=0.2)


class RecipeRun:
    """A recipe in training, advanced a few steps at a time so two runs can be interleaved. Chapter 7.

    train_s counts only the training steps (forward, backward, clip, update), never evaluation. With
    recipe.compile the steps run through torch.compile(model): it is compiled here, by one untimed forward and
    backward pass on a batch of its own generator (no update), and compile_s keeps those wall seconds.
    on_nonfinite (fit's): "raise" (default) raises book.optim.Diverged at a NaN or inf training loss; "stop" ends
    the run there (done; history.diverged is that step): a rate sweep's way to record a diverged run.
    """

    def __init__(self, recipe: GPTRecipe, vocab_size: int, train_data: torch.Tensor, seed: int = 1337,
                 device=None, on_nonfinite: str = "raise"):
        one_of(NONFINITE, on_nonfinite=on_nonfinite)
        self.on_nonfinite = on_nonfinite
        torch.manual_seed(seed)
        self.recipe, self.train_data, self.device = recipe, train_data, device
        self.model = GPT(recipe.config(vocab_size)).to(device)
        self.opt = recipe.make_optimizer(self.model)
        self.generator = torch.Generator().manual_seed(seed)
        self.history, self.stopped = History(), False
        self.last_step = step_budget(recipe.steps)   # BOOK_MAX_STEPS: a smoke run of the code path
        self.train_model, self.compile_s = self.model, 0.0
        if recipe.compile:
            started = time.perf_counter()
            if os.environ.get("ATEN_CPU_CAPABILITY") == "default" and torch.device(device or "cpu").type == "cpu":
                # PyTorch's scalar kernels: inductor's vectorised C++ then fails to build (at::vec undeclared)
                import torch._inductor.config as inductor_config
                inductor_config.cpp.simdlen = 1
            self.train_model = torch.compile(self.model)
            self.model.train()
            x, y = get_batch(train_data, recipe.batch_size, recipe.context_len, torch.Generator().manual_seed(0),
                             device)
            self.train_model(x, y)[1].backward()       # compiles the forward and the backward graphs
            self.model.zero_grad(set_to_none=True)
            self.compile_s = time.perf_counter() - started

    @property
    def step(self) -> int:
        return self.history.steps

    @property
    def train_s(self) -> float:
        return self.history.train_seconds

    @property
    def losses(self) -> List[float]:
        return self.history.train_loss

    @property
    def done(self) -> bool:
        return self.stopped or self.step >= self.last_step or self.history.diverged is not None

    def advance(self, n: int) -> None:
        """Train up to n more steps (not past the recipe's end), timing each: fit, from the step reached."""
        positive_int(n=n)
        if self.step >= self.last_step or self.history.diverged is not None:
            return
        r = self.recipe
        fit(self.model, lambda: get_batch(self.train_data, r.batch_size, r.context_len, self.generator, self.device),
            loss_fn=lambda m, b: self.train_model(*b)[1], optimizer=self.opt, steps=r.steps, schedule=r.lr_factor,
            grad_clip=r.grad_clip, start=self.step, stop=self.step + n, history=self.history, progress=False,
            on_nonfinite=self.on_nonfinite)


def race(recipes, vocab_size: int, train_data: torch.Tensor, val_data: torch.Tensor, target: float, *,
         every, eval_windows: int = 1024, stop_at_target=(), seed: int = 1337, device=None,
         log=None, progress: bool = False):
    """Train recipes interleaved, `every[i]` steps at a time, until each ends. Chapter 7.

    After every chunk a run is evaluated (untimed) on the same fixed validation windows. Returns the
    runs and their curves [(step, train_s, val), ...]. Runs named in stop_at_target stop once they reach
    the target; interleaving in short chunks makes both runs share whatever load the machine has.
    """
    from tqdm.auto import tqdm

    recipes = list(recipes)
    if isinstance(every, (str, bytes)) or not hasattr(every, "__len__"):
        raise ValueError(f"every must be a list of positive ints, one per recipe ({len(recipes)}), got {every!r}")
    every = list(every)
    if len(every) != len(recipes) or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0
                                             for n in every):
        raise ValueError(f"every must hold one positive int per recipe ({len(recipes)} recipes), got {every!r}")
    positive_int(eval_windows=eval_windows)
    runs = [RecipeRun(r, vocab_size, train_data, seed=seed, device=device) for r in recipes]
    curves = [[] for _ in runs]
    bar = tqdm(total=sum(r.steps for r in recipes), desc="race", disable=not progress, mininterval=1.0)
    while not all(run.done for run in runs):
        for run, n, curve in zip(runs, every, curves):
            if run.done:
                continue
            before = run.step
            run.advance(n)
            bar.update(run.step - before)
            v = evaluate_lm(run.model, val_data, 64, run.recipe.context_len, max(1, eval_windows // 64),
                            device=device)
            curve.append((run.step, run.train_s, v))
            if log is not None:
                log(f"  {run.recipe.name:<28} step {run.step:5d}  train {run.train_s:7.2f} s  val {v:.4f}")
            if v <= target and run.recipe.name in stop_at_target:
                bar.update(run.last_step - run.step)
                run.stopped = True
    bar.close()
    return runs, curves


def time_to(curve, target: float):
    """(train seconds, step) at the first evaluation with val <= target in a race curve, else None."""
    return next(((secs, step) for step, secs, v in curve if v <= target), None)
