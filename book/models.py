"""Whole language models built from the book's parts: the decoder-only GPT. Chapter 7.

Shape legend (batch first): B batch, T time, C = d_model, H = n_heads, G = n_kv_heads, V vocab.

GPT (Radford et al. 2018, 2019) = token embedding + learned positions -> n_layers pre-norm blocks of
causal self-attention and FFN (no cross-attention) -> final LayerNorm -> lm_head to V logits.
Layout and initialisation follow nanoGPT, so its recipes carry over.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn

from .data import get_batch
from .generate import GroupedQueryAttention, KVCache
from .layers import TransformerBlock
from .train import lm_loss
from .utils import step_budget

__all__ = ["GPTConfig", "GPTBlock", "GPT", "GPTRecipe", "NANOGPT_CPU", "NANOGPT_CPU_FINAL_VAL", "COURSE_CPU",
           "NANOGPT_GPU", "RecipeRun", "race", "time_to"]


@dataclass
class GPTConfig:
    """Sizes of a GPT. n_kv_heads=None means n_heads (plain multi-head); d_ff=None means 4 * d_model."""
    vocab_size: int
    context_len: int = 64
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 4
    n_kv_heads: Optional[int] = None
    d_ff: Optional[int] = None
    dropout: float = 0.0
    bias: bool = False
    tie_weights: bool = True

    def __post_init__(self):
        for name in ("vocab_size", "context_len", "d_model", "n_heads", "n_layers"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model must be divisible by n_heads, got {self.d_model} and {self.n_heads}")
        if self.d_ff is not None and (not isinstance(self.d_ff, int) or isinstance(self.d_ff, bool) or self.d_ff < 1):
            raise ValueError(f"d_ff must be a positive int or None (4 * d_model), got {self.d_ff!r}")
        g = self.n_kv_heads
        if g is not None and (not isinstance(g, int) or isinstance(g, bool) or g < 1 or self.n_heads % g):
            raise ValueError(f"n_kv_heads must be None or a positive divisor of n_heads={self.n_heads} "
                             f"(each kv head serves n_heads // n_kv_heads query heads), got {g!r}")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) or not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout!r}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads


class GPTBlock(TransformerBlock):
    """A pre-norm causal TransformerBlock whose attention is grouped-query and can use a KV cache. Chapter 7.

    x (B, T, C) -> (B, T, C). Uses PyTorch's fused nn.LayerNorm (equal to book.layers.LayerNorm, one kernel).
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__(cfg.d_model, cfg.n_heads, cfg.d_ff, norm="pre", causal=True, bias=cfg.bias,
                         dropout=cfg.dropout)
        self.attn = GroupedQueryAttention(cfg.d_model, cfg.n_heads, cfg.n_kv_heads, bias=cfg.bias,
                                          dropout=cfg.dropout)
        self.ln1 = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.ln2 = nn.LayerNorm(cfg.d_model, bias=cfg.bias)

    def forward(self, x: torch.Tensor, cache: Optional[KVCache] = None, layer: int = 0) -> torch.Tensor:
        if cache is None:
            return super().forward(x)
        x = x + self.resid_drop(self.attn(self.ln1(x), is_causal=True, cache=cache, layer=layer))
        return x + self.resid_drop(self.ffn(self.ln2(x)))


class GPT(nn.Module):
    """Decoder-only Transformer language model. Chapter 7.

    forward(idx (B, T)) -> logits (B, T, V); with targets (B, T) -> (logits, mean cross-entropy).
    With a KVCache (from new_cache), idx holds only the tokens after the cached ones.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.context_len, c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList([GPTBlock(c) for _ in range(c.n_layers)])
        self.ln_f = nn.LayerNorm(c.d_model, bias=c.bias)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_weights:
            self.lm_head.weight = self.tok_emb.weight  # one matrix reads and writes tokens (Press & Wolf 2017)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith(("attn.out_proj.weight", "ffn.down.weight")):
                # each block adds two outputs to the residual stream: keep its variance from growing with depth
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * c.n_layers))

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def new_cache(self, batch_size: int, max_len: Optional[int] = None) -> KVCache:
        """An empty KV cache for batch_size sequences of up to max_len (default context_len) tokens."""
        c, p = self.config, self.lm_head.weight
        return KVCache(c.n_layers, batch_size, c.n_kv_heads or c.n_heads, max_len or c.context_len, c.d_head,
                       dtype=p.dtype, device=p.device)

    def _check_cache(self, cache: KVCache, batch_size: int) -> None:
        """Raise ValueError unless the cache was made for this model and this batch size (shapes only)."""
        c = self.config
        want = (c.n_layers, batch_size, c.n_kv_heads or c.n_heads, c.d_head)
        got = (cache.k.shape[0], cache.k.shape[1], cache.k.shape[2], cache.k.shape[4])
        if got != want:
            raise ValueError(f"this KV cache holds (n_layers, batch, n_kv_heads, d_head) = {got}, but the model "
                             f"and idx need {want}: make it with model.new_cache({batch_size})")

    def forward(self, idx: torch.Tensor, targets: Optional[torch.Tensor] = None,
                cache: Optional[KVCache] = None):
        if not isinstance(idx, torch.Tensor) or idx.dtype.is_floating_point or idx.dtype == torch.bool:
            got = idx.dtype if isinstance(idx, torch.Tensor) else type(idx).__name__
            raise TypeError(f"idx must be an integer tensor of token ids (torch.long), got {got}")
        if idx.dim() != 2:
            raise ValueError(f"idx should have shape (B, T), got {tuple(idx.shape)}")
        if cache is not None:
            self._check_cache(cache, idx.shape[0])
        start = cache.length if cache is not None else 0
        T = idx.shape[1]
        if start + T > self.config.context_len:
            raise ValueError(f"sequence of {start + T} tokens is longer than context_len={self.config.context_len}")
        pos = torch.arange(start, start + T, device=idx.device)
        try:
            tok = self.tok_emb(idx)  # (B, T) -> (B, T, C)
        except IndexError:  # the CPU kernel's "index out of range in self": say which range
            raise ValueError(f"token ids must lie in [0, vocab_size={self.config.vocab_size}), got ids from "
                             f"{int(idx.min())} to {int(idx.max())}") from None
        x = self.drop(tok + self.pos_emb(pos))  # (B, T) -> (B, T, C)
        for i, block in enumerate(self.blocks):
            x = block(x, cache, i)
        if cache is not None:
            cache.advance(T)
        logits = self.lm_head(self.ln_f(x))  # (B, T, C) -> (B, T, V)
        return logits if targets is None else (logits, lm_loss(logits, targets))

    def optimizer(self, lr: float, weight_decay: float = 0.1, betas=(0.9, 0.99)) -> torch.optim.AdamW:
        """AdamW with weight decay on matrices (dim >= 2) only, not on norms and biases (as nanoGPT)."""
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=lr, betas=betas)


@dataclass
class GPTRecipe:
    """How to train a character GPT: model sizes, batch, schedule, optimiser. Chapter 7.

    The learning rate warms up linearly for `warmup` steps, then follows a cosine from lr to min_lr
    over the remaining steps (nanoGPT's get_lr, exactly). AdamW decays matrices only.
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

    def __post_init__(self):
        def number(name):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
                raise ValueError(f"{name} must be a number, got {v!r}")
            return v

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

    def config(self, vocab_size: int) -> GPTConfig:
        return GPTConfig(vocab_size, self.context_len, self.d_model, self.n_heads, self.n_layers,
                         dropout=self.dropout, bias=False)

    def lr_at(self, step: int) -> float:
        """Learning rate at `step` (0-based)."""
        if step < self.warmup:
            return self.lr * (step + 1) / (self.warmup + 1)
        progress = min(1.0, (step - self.warmup) / max(1, self.steps - self.warmup))
        return self.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (self.lr - self.min_lr)

    @property
    def tokens(self) -> int:
        return self.steps * self.batch_size * self.context_len


# nanoGPT's "I only have a MacBook" run on shakespeare_char (README): val loss about 1.88 after 2000 steps.
NANOGPT_CPU = GPTRecipe("nanoGPT CPU recipe")
NANOGPT_CPU_FINAL_VAL = 1.8857  # its validation loss (nats) after those 2000 steps, the course's target
# The course's recipe: a higher peak rate with a short warmup, half the depth, a bigger batch, and a schedule
# as long as the budget (600 steps reach nanoGPT's final loss; Chapter 7 gives it 2000).
COURSE_CPU = GPTRecipe("course recipe", n_layers=2, batch_size=32, steps=600, lr=8e-3, min_lr=8e-4, warmup=30)
# nanoGPT's GPU run on shakespeare_char (about 3 min on an A100 to val 1.47).
NANOGPT_GPU = GPTRecipe("nanoGPT GPU recipe", n_layers=6, n_heads=6, d_model=384, context_len=256,
                        batch_size=64, steps=5000, warmup=100, dropout=0.2)


class RecipeRun:
    """A recipe in training, advanced a few steps at a time so two runs can be interleaved. Chapter 7.

    train_s counts only the training steps (forward, backward, clip, update), never evaluation.
    """

    def __init__(self, recipe: GPTRecipe, vocab_size: int, train_data: torch.Tensor, seed: int = 1337,
                 device=None):
        torch.manual_seed(seed)
        self.recipe, self.train_data, self.device = recipe, train_data, device
        self.model = GPT(recipe.config(vocab_size)).to(device)
        self.opt = self.model.optimizer(recipe.lr, recipe.weight_decay, (0.9, recipe.beta2))
        self.generator = torch.Generator().manual_seed(seed)
        self.step, self.train_s, self.losses, self.stopped = 0, 0.0, [], False
        self.last_step = step_budget(recipe.steps)   # BOOK_MAX_STEPS: a smoke run of the code path

    @property
    def done(self) -> bool:
        return self.stopped or self.step >= self.last_step

    def advance(self, n: int) -> None:
        """Train up to n more steps (not past the recipe's end), timing each."""
        import time

        r, model = self.recipe, self.model
        model.train()
        for _ in range(min(n, self.last_step - self.step)):
            t0 = time.perf_counter()
            for group in self.opt.param_groups:
                group["lr"] = r.lr_at(self.step)
            x, y = get_batch(self.train_data, r.batch_size, r.context_len, self.generator, self.device)
            _, loss = model(x, y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), r.grad_clip)
            self.opt.step()
            loss = loss.item()  # waits for the device, so the time is real
            self.train_s += time.perf_counter() - t0
            self.losses.append(loss)
            self.step += 1


def race(recipes, vocab_size: int, train_data: torch.Tensor, val_data: torch.Tensor, target: float, *,
         every, eval_windows: int = 1024, stop_at_target=(), seed: int = 1337, device=None,
         log=None, progress: bool = False):
    """Train recipes interleaved, `every[i]` steps at a time, until each ends. Chapter 7.

    After every chunk a run is evaluated (untimed) on the same fixed validation windows. Returns the
    runs and their curves [(step, train_s, val), ...]. Runs named in stop_at_target stop once they reach
    the target; interleaving in short chunks makes both runs share whatever load the machine has.
    """
    from tqdm.auto import tqdm

    from .train import evaluate_lm

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
