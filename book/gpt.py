"""The GPT on one page: token ids -> embeddings + positions -> blocks -> logits. Chapter 7.

Read it top to bottom, as nanoGPT's model.py: GPTConfig (the sizes), Block (one layer), GPT (the stack); the
attention, the heart of it, is book.attention.Attention (one class for every model of the book).
Shape legend (batch first): B batch, T time, C = d_model, H = n_heads, G = n_kv_heads, V vocab.

GPT (Radford et al. 2018, 2019) = token embedding + learned positions -> n_layers pre-norm blocks of
causal self-attention and FFN (no cross-attention) -> final LayerNorm -> lm_head to V logits.
Layout and initialisation follow nanoGPT, so its recipes carry over. The parts come from lower layers of
the package (book.attention, book.layers, book.kv_cache, book.positional); generation (book.generate) and
training (book.train) sit on top.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import Attention
from .checks import (allocating, divides, one_of, optional_positive_int, positive_int, positive_number, probability,
                     token_ids)
from .kv_cache import Int8KVCache, KVCache
from .layers import FeedForward, LayerNorm, RMSNorm, swiglu_hidden
from .positional import LearnedPositionalEmbedding
from .utils import adamw

__all__ = ["GPTConfig", "Block", "GPT", "lm_loss"]


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy (nats) of logits (B, T, V) against the next tokens, targets (B, T)."""
    if logits.dim() != 3 or logits.shape[:2] != targets.shape:
        raise ValueError(f"logits should be (B, T, V) and targets (B, T); got {tuple(logits.shape)} "
                         f"and {tuple(targets.shape)}")
    token_ids(targets, logits.shape[-1], "targets")     # skipped inside checks.inputs_checked (fit after step 0)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


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
    positions: str = "learned"   # or "rope": rotate queries and keys instead (Chapter 5), no position table
    # Chapter 10: what changed since GPT-2 (the defaults are GPT-2's, so Chapters 7-9 are unchanged)
    norm: str = "layer"          # or "rms": RMSNorm (LLaMA)
    activation: str = "gelu"     # or "swiglu" (d_ff defaults to 8C/3: equal parameters) or "relu2"
    qk_norm: bool = False        # RMSNorm on each head's queries and keys
    zero_init: bool = False      # output projections of attention and FFN start at zero: every block starts as identity
    logit_softcap: Optional[float] = None   # logits = cap * tanh(logits / cap) (Gemma 2)
    window: Optional[int] = None            # sliding-window attention over the `window` latest keys

    def __post_init__(self):
        positive_int(vocab_size=self.vocab_size, context_len=self.context_len, d_model=self.d_model,
                     n_heads=self.n_heads, n_layers=self.n_layers)
        divides("n_heads", self.n_heads, "d_model", self.d_model)
        if self.d_ff is not None and (not isinstance(self.d_ff, int) or isinstance(self.d_ff, bool) or self.d_ff < 1):
            raise ValueError(f"d_ff must be a positive int or None (4 * d_model), got {self.d_ff!r}")
        g = self.n_kv_heads
        if g is not None and (not isinstance(g, int) or isinstance(g, bool) or g < 1 or self.n_heads % g):
            raise ValueError(f"n_kv_heads must be None or a positive divisor of n_heads={self.n_heads} "
                             f"(each kv head serves n_heads // n_kv_heads query heads), got {g!r}")
        probability(dropout=self.dropout)
        one_of(("learned", "rope"), positions=self.positions)
        one_of(("layer", "rms"), norm=self.norm)
        one_of(("gelu", "swiglu", "relu2"), activation=self.activation)
        if self.logit_softcap is not None:
            positive_number(logit_softcap=self.logit_softcap)
        optional_positive_int(window=self.window)
        for name in ("bias", "qk_norm", "tie_weights", "zero_init"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def ffn_hidden(self) -> int:
        """The FFN's hidden width F: d_ff if given, else 4C (8C/3 for SwiGLU: the same parameters)."""
        if self.d_ff is not None:
            return self.d_ff
        return swiglu_hidden(self.d_model) if self.activation == "swiglu" else 4 * self.d_model


def _norm(cfg: GPTConfig) -> nn.Module:
    """The config's norm: LayerNorm (GPT-2) or RMSNorm (LLaMA), book.layers' (PyTorch's fused kernels)."""
    return RMSNorm(cfg.d_model, eps=1e-6) if cfg.norm == "rms" else LayerNorm(cfg.d_model, bias=cfg.bias)


class Block(nn.Module):
    """One GPT layer, pre-norm: x + attn(ln1(x)), then x + ffn(ln2(x)). Chapter 7.

    x (B, T, C) -> (B, T, C). The attention is causal and grouped-query (plain multi-head when
    n_kv_heads = n_heads) and can read and extend a KV cache. The same function as Chapter 6's
    TransformerBlock(norm="pre", causal=True), with Chapter 10's options.
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = _norm(cfg)
        self.attn = Attention(cfg.d_model, cfg.n_heads, cfg.n_kv_heads, bias=cfg.bias, dropout=cfg.dropout,
                              rope=cfg.positions == "rope", qk_norm=cfg.qk_norm, window=cfg.window)
        self.ln2 = _norm(cfg)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn_hidden, activation=cfg.activation, bias=cfg.bias,
                               dropout=cfg.dropout)
        self.resid_drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, cache: Optional[KVCache] = None, layer: int = 0, need_weights: bool = False):
        """x (B, T, C) -> (B, T, C); with a cache, x holds only the new tokens (layer = this block's index).
        need_weights=True -> (x, attention weights (B, H, T, Tk))."""
        out = self.attn(self.ln1(x), causal=True, cache=cache, layer=layer, need_weights=need_weights)
        a, weights = out if need_weights else (out, None)
        x = x + self.resid_drop(a)
        x = x + self.resid_drop(self.ffn(self.ln2(x)))
        return (x, weights) if need_weights else x


class GPT(nn.Module):
    """Decoder-only Transformer language model. Chapter 7.

    forward(idx (B, T)) -> logits (B, T, V); with targets (B, T) -> (logits, mean cross-entropy).
    need_weights=True appends the attention maps, a list of each layer's weights (B, H, T, Tk):
    (logits, maps) or (logits, loss, maps). With a KVCache (from new_cache), idx holds only the tokens after
    the cached ones.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = c = config
        with allocating("the model's weights", vocab_size=c.vocab_size, d_model=c.d_model, n_layers=c.n_layers):
            self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
            # Chapter 5: a learned table added to the tokens, or none when every attention rotates by position (RoPE)
            self.pos_emb = LearnedPositionalEmbedding(c.d_model, c.context_len) if c.positions == "learned" else None
            self.drop = nn.Dropout(c.dropout)
            self.blocks = nn.ModuleList([Block(c) for _ in range(c.n_layers)])
            self.ln_f = _norm(c)
            self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
            if c.tie_weights:
                self.lm_head.weight = self.tok_emb.weight  # one matrix reads and writes tokens (Press & Wolf 2017)
            self.apply(self._init_weights)
            for name, p in self.named_parameters():
                if name.endswith(("attn.out_proj.weight", "ffn.down.weight")):
                    # each block adds two outputs to the residual stream: keep its variance from growing with depth
                    if c.zero_init:
                        nn.init.zeros_(p)   # modded-nanoGPT: every block starts as the identity
                    else:
                        nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * c.n_layers))

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding, LearnedPositionalEmbedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def new_cache(self, batch_size: int, context_len: Optional[int] = None, int8: bool = False) -> KVCache:
        """An empty KV cache for batch_size sequences of up to context_len (default: the model's) tokens;
        int8=True stores keys and values as INT8 with a scale per vector (Chapter 10)."""
        c, p = self.config, self.lm_head.weight
        kind = Int8KVCache if int8 else KVCache
        return kind(c.n_layers, batch_size, c.n_kv_heads or c.n_heads, context_len or c.context_len, c.d_head,
                    dtype=p.dtype, device=p.device)

    def _check_cache(self, cache: KVCache, batch_size: int) -> None:
        """Raise ValueError unless the cache was made for this model and this batch size (shapes only)."""
        c = self.config
        want = (c.n_layers, batch_size, c.n_kv_heads or c.n_heads, c.d_head)
        got = (cache.k.shape[0], cache.k.shape[1], cache.k.shape[2], cache.k.shape[4])
        if got != want:
            raise ValueError(f"this KV cache holds (n_layers, batch, n_kv_heads, d_head) = {got}, but the model "
                             f"and idx need {want}: make it with model.new_cache({batch_size})")

    def forward(self, idx: torch.Tensor, targets: Optional[torch.Tensor] = None, *,
                cache: Optional[KVCache] = None, need_weights: bool = False):
        if not isinstance(idx, torch.Tensor) or idx.dtype.is_floating_point or idx.dtype == torch.bool:
            got = idx.dtype if isinstance(idx, torch.Tensor) else type(idx).__name__
            raise TypeError(f"idx must be an integer tensor of token ids (torch.long), got {got}")
        if idx.dim() != 2:
            raise ValueError(f"idx should have shape (B, T), got {tuple(idx.shape)}")
        token_ids(idx, self.config.vocab_size, "idx")     # once, here (skipped inside checks.inputs_checked)
        if cache is not None:
            self._check_cache(cache, idx.shape[0])
        start = cache.length if cache is not None else 0
        T = idx.shape[1]
        if start + T > self.config.context_len:
            raise ValueError(f"sequence of {start + T} tokens is longer than context_len={self.config.context_len}")
        try:
            tok = self.tok_emb(idx)  # (B, T) -> (B, T, C)
        except IndexError:  # the CPU kernel's "index out of range in self": say which range
            raise ValueError(f"token ids must lie in [0, vocab_size={self.config.vocab_size}), got ids from "
                             f"{int(idx.min())} to {int(idx.max())}") from None
        if self.pos_emb is not None:
            tok = self.pos_emb(tok, offset=start)  # + positions start .. start+T-1: (B, T, C)
        x, maps = self.drop(tok), []
        for i, block in enumerate(self.blocks):
            x = block(x, cache, i, need_weights=need_weights)
            if need_weights:
                x, weights = x
                maps.append(weights)   # (B, H, T, Tk)
        if cache is not None:
            cache.advance(T)
        logits = self.lm_head(self.ln_f(x))  # (B, T, C) -> (B, T, V)
        if self.config.logit_softcap is not None:   # smoothly bounded to (-cap, cap)
            cap = self.config.logit_softcap
            logits = cap * torch.tanh(logits / cap)
        out = (logits,) if targets is None else (logits, lm_loss(logits, targets))
        out += (maps,) if need_weights else ()
        return out[0] if len(out) == 1 else out

    def optimizer(self, lr: float, weight_decay: float = 0.1, betas=(0.9, 0.99)) -> torch.optim.AdamW:
        """AdamW with weight decay on matrices (dim >= 2) only, not on norms and biases (as nanoGPT)."""
        return adamw(self, lr, weight_decay, betas)
