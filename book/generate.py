"""Generating text: sampling filters, the generate loop, the KV cache and grouped-query attention. Chapter 7.

Shape legend (batch first): B batch, T time (Tq new queries, Tk cached + new keys), C = d_model,
H = n_heads query heads, G = n_kv_heads key/value heads (H % G == 0), D = d_head, V vocab.

Sampling works on logits (..., V): temperature divides them, top-k and top-p set the logits of
dropped tokens to -inf, so a softmax afterwards gives them probability exactly 0.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import attention
from .layers import MultiHeadAttention, _check_layer_mask

__all__ = ["greedy", "apply_temperature", "top_k_filter", "top_p_filter", "next_token_probs",
           "sample_next", "generate", "KVCache", "GroupedQueryAttention", "kv_cache_bytes",
           "check_top_p", "check_kv_cache_bytes"]


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """The most likely token: logits (..., V) -> ids (...). Chapter 7."""
    return logits.argmax(dim=-1)


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """logits / temperature (> 0): below 1 sharpens the distribution, above 1 flattens it. Chapter 7."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 here (use greedy for temperature 0), got {temperature}")
    return logits / temperature


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits (..., V), set the rest to -inf (ties with the k-th are kept). Chapter 7."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    k = min(k, logits.shape[-1])
    kth = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest logit
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter: keep the smallest set of most likely tokens whose mass reaches p. Chapter 7.

    logits (..., V) -> (..., V) with dropped tokens at -inf (Holtzman et al. 2019). A token is kept
    when the mass of the tokens ranked above it is still below p, so the top token always stays.
    Example: probs [0.5, 0.3, 0.2], p=0.7 -> keeps the first two (0.5 < 0.7, then 0.8 >= 0.7).
    """
    if not 0.0 < p <= 1.0:
        raise ValueError(f"p must lie in (0, 1], got {p}")
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs  # (..., V): mass of the tokens ranked above each one
    drop_sorted = mass_before >= p
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def next_token_probs(logits: torch.Tensor, temperature: float = 1.0, top_k: Optional[int] = None,
                     top_p: Optional[float] = None) -> torch.Tensor:
    """The distribution a sampler draws from: logits (..., V) -> probs (..., V). Chapter 7.

    Order: temperature, then top-k, then top-p (as in Hugging Face). temperature=0 means greedy:
    all mass on the argmax.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if temperature == 0:
        return F.one_hot(greedy(logits), logits.shape[-1]).to(logits.dtype)
    logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return logits.softmax(dim=-1)


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: Optional[int] = None,
                top_p: Optional[float] = None, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Draw one token per row: logits (B, V) -> ids (B,). temperature=0 is greedy. Chapter 7."""
    if logits.dim() != 2:
        raise ValueError(f"logits should have shape (B, V), got {tuple(logits.shape)}")
    if temperature == 0:
        return greedy(logits)
    probs = next_token_probs(logits, temperature, top_k, top_p)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def _check_token_ids(idx, name: str) -> None:
    """Raise TypeError unless idx is an integer tensor of token ids (shape and range are checked elsewhere)."""
    if not isinstance(idx, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(idx).__name__}")
    if idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids (dtype torch.long), got dtype {idx.dtype}")


@torch.no_grad()
def generate(model: nn.Module, idx: torch.Tensor, max_new_tokens: int, *, temperature: float = 1.0,
             top_k: Optional[int] = None, top_p: Optional[float] = None,
             generator: Optional[torch.Generator] = None, use_cache: bool = False) -> torch.Tensor:
    """Extend prompts idx (B, T) by max_new_tokens sampled tokens -> (B, T + max_new_tokens). Chapter 7.

    Without a cache every step reruns the model on the whole (cropped) sequence; with use_cache=True
    the model (a book.models.GPT) sees the prompt once, then one new token per step.
    """
    _check_token_ids(idx, "idx")
    if idx.dim() != 2 or idx.shape[1] < 1:
        raise ValueError(f"idx should have shape (B, T) with T >= 1, got {tuple(idx.shape)}")
    if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool):
        raise TypeError(f"max_new_tokens must be an int, got {max_new_tokens!r}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1 (the prompt alone needs no generate), got {max_new_tokens}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature >= 0:
        raise ValueError(f"temperature must be a number >= 0 (0 means greedy), got {temperature!r}")
    if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1):
        raise ValueError(f"top_k must be a positive int or None, got {top_k!r}")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float))
                              or not 0.0 < top_p <= 1.0):
        raise ValueError(f"top_p must lie in (0, 1] or be None, got {top_p!r}")
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    if vocab is not None and idx.numel():
        lo, hi = int(idx.min()), int(idx.max())  # once per call, not per step
        if lo < 0 or hi >= vocab:
            raise ValueError(f"prompt token ids must lie in [0, vocab_size={vocab}), got ids from {lo} to {hi}")
    was_training = model.training
    model.eval()
    ctx = model.config.context_len
    cache = None
    if use_cache:
        if idx.shape[1] + max_new_tokens > ctx:
            raise ValueError(f"with a KV cache, prompt + new tokens must fit context_len={ctx} "
                             f"(absolute positions cannot slide), got {idx.shape[1]} + {max_new_tokens}")
        cache = model.new_cache(idx.shape[0], idx.shape[1] + max_new_tokens)
    step_input = idx
    for _ in range(max_new_tokens):
        logits = model(step_input, cache=cache) if use_cache else model(idx[:, -ctx:])
        nxt = sample_next(logits[:, -1, :], temperature, top_k, top_p, generator)  # (B,)
        idx = torch.cat([idx, nxt[:, None]], dim=1)
        step_input = nxt[:, None]  # with a cache, only the new token goes in next time
    model.train(was_training)
    return idx


class KVCache:
    """Keys and values of every layer for the tokens seen so far, preallocated to max_len. Chapter 7.

    k and v are (L, B, G, max_len, D); `length` tokens are filled. A layer calls update(layer, k, v)
    with its new (B, G, Tq, D) keys/values and gets back all (B, G, length + Tq, D) so far; the model
    calls advance(Tq) once every layer has written.
    """

    def __init__(self, n_layers: int, batch_size: int, n_kv_heads: int, max_len: int, d_head: int,
                 dtype=torch.float32, device=None):
        shape = (n_layers, batch_size, n_kv_heads, max_len, d_head)
        for name, n in zip(("n_layers", "batch_size", "n_kv_heads", "max_len", "d_head"), shape):
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ValueError(f"{name} must be a positive int, got {n!r}")
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.max_len, self.length = max_len, 0

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Store new keys/values (B, G, Tq, D) after the cached ones; return all of them so far."""
        L, B, G, _, D = self.k.shape
        if not isinstance(layer, int) or isinstance(layer, bool) or not 0 <= layer < L:
            raise IndexError(f"layer must be an int in [0, {L}) (the cache holds {L} layers), got {layer!r}")
        for name, t in (("k", k), ("v", v)):
            if t.dim() != 4 or (t.shape[0], t.shape[1], t.shape[3]) != (B, G, D) or t.shape[2] != k.shape[2]:
                raise ValueError(f"{name} should have shape (B, G, Tq, D) = ({B}, {G}, Tq, {D}) to fit this "
                                 f"cache, got {tuple(t.shape)}")
        end = self.length + k.shape[-2]
        if end > self.max_len:
            raise ValueError(f"KV cache is full: {self.length} cached + {k.shape[-2]} new > max_len={self.max_len}")
        self.k[layer, :, :, self.length:end] = k
        self.v[layer, :, :, self.length:end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]

    def advance(self, n: int) -> None:
        """Mark n more tokens as cached (n >= 0, and never past max_len)."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"advance(n) needs an int n >= 0 (tokens just written), got {n!r}")
        if self.length + n > self.max_len:
            raise ValueError(f"cannot advance past max_len={self.max_len}: {self.length} cached + {n}")
        self.length += n

    @property
    def nbytes(self) -> int:
        """Memory the cache holds (both tensors, all max_len slots)."""
        return self.k.numel() * self.k.element_size() * 2


def kv_cache_bytes(n_layers: int, n_kv_heads: int, d_head: int, seq_len: int, batch_size: int = 1,
                   bytes_per_value: int = 2) -> int:
    """Cache size: 2 (K and V) * layers * batch * kv heads * tokens * d_head * bytes. Chapter 7."""
    return 2 * n_layers * batch_size * n_kv_heads * seq_len * d_head * bytes_per_value


class GroupedQueryAttention(MultiHeadAttention):
    """Causal self-attention with H query heads sharing G key/value heads, and an optional KV cache. Chapter 7.

    x (B, T, C) -> (B, T, C). n_kv_heads = n_heads is plain multi-head attention; n_kv_heads = 1 is
    multi-query attention (Shazeer 2019); in between is grouped-query attention (Ainslie et al. 2023).
    k_proj and v_proj shrink to C -> G * D, so the cache shrinks by H / G.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: Optional[int] = None, *, bias: bool = False,
                 dropout: float = 0.0):
        super().__init__(d_model, n_heads, bias=bias, dropout=dropout)
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if not isinstance(n_kv_heads, int) or n_kv_heads < 1 or n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads must be a positive divisor of n_heads={n_heads}, got {n_kv_heads!r}")
        self.n_kv_heads = n_kv_heads
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)

    def _split_kv(self, t: torch.Tensor) -> torch.Tensor:
        B, T, _ = t.shape
        return t.view(B, T, self.n_kv_heads, self.d_head).transpose(1, 2)  # (B, T, G*D) -> (B, G, T, D)

    @staticmethod
    def _extend_cache(k, v, cache: KVCache, layer: int):
        """Append new keys/values (B, G, T, D); return all of them and the (mask, is_causal) for T new queries."""
        start, T = cache.length, k.shape[-2]
        k, v = cache.update(layer, k, v)  # (B, G, start + T, D)
        if start == 0:
            return k, v, None, True  # a fresh prompt: the ordinary causal mask
        if T == 1:
            return k, v, None, False  # one new token may see every cached key
        # new query i sits at position start + i and may see keys 0 .. start + i
        mask = torch.arange(start + T, device=k.device) <= start + torch.arange(T, device=k.device)[:, None]
        return k, v, mask, False

    def forward(self, x: torch.Tensor, context=None, mask: Optional[torch.Tensor] = None,
                is_causal: bool = False, need_weights: bool = False, cache: Optional[KVCache] = None,
                layer: int = 0):
        """x (B, T, C) -> (B, T, C); with a cache, x holds only the new tokens and attends to all cached ones."""
        if context is not None or need_weights:
            raise ValueError("GroupedQueryAttention is self-attention only and returns no weights")
        self._check_inputs(x, None)
        B, T, C = x.shape
        _check_layer_mask(mask, B, self.n_heads, T, T)
        q, k, v = self._split(self.q_proj(x)), self._split_kv(self.k_proj(x)), self._split_kv(self.v_proj(x))
        if cache is not None:
            if not is_causal or mask is not None:
                raise ValueError("with a KV cache, call with is_causal=True and no mask")
            k, v, mask, is_causal = self._extend_cache(k, v, cache, layer)  # k, v (B, G, Tk, D)
        groups = self.n_heads // self.n_kv_heads
        if groups > 1:  # each kv head serves `groups` query heads
            k, v = (t.repeat_interleave(groups, dim=1) for t in (k, v))  # (B, G, Tk, D) -> (B, H, Tk, D)
        p = self.dropout if self.training else 0.0
        out = attention(q, k, v, mask=mask, is_causal=is_causal, dropout_p=p)  # (B, H, T, D)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, C))  # (B, H, T, D) -> (B, T, C)


def check_top_p(fn) -> bool:
    """Self-check for the chapter 7 exercise: does `fn(logits, p)` keep the smallest set reaching mass p?"""
    probs = torch.tensor([[0.05, 0.5, 0.2, 0.25], [0.6, 0.2, 0.15, 0.05]])
    cases = [(0.45, [[False, True, False, False], [True, False, False, False]]),
             (0.7, [[False, True, False, True], [True, True, False, False]]),
             (0.9, [[False, True, True, True], [True, True, True, False]]),
             (1.0, [[True, True, True, True], [True, True, True, True]])]
    for p, keep in cases:
        got = fn(probs.log(), p)
        if tuple(got.shape) != tuple(probs.shape):
            raise AssertionError(f"output should have the logits' shape {tuple(probs.shape)}, got {tuple(got.shape)}")
        kept = torch.isfinite(got)
        if kept.tolist() != keep:
            raise AssertionError(f"p={p}, probs {probs.tolist()}: should keep {keep}, kept {kept.tolist()}. "
                                 "Hint: keep a token while the mass ranked above it is still < p.")
    print("Correct: your top-p filter keeps the smallest nucleus in every case.")
    return True


def check_kv_cache_bytes(fn) -> bool:
    """Self-check for the chapter 7 exercise: fn(n_layers, n_kv_heads, d_head, seq_len, batch_size, bytes)."""
    cases = [(32, 8, 128, 8192, 1, 2), (4, 4, 32, 64, 3, 4), (80, 8, 128, 4096, 2, 2), (2, 1, 5, 7, 1, 1)]
    for args in cases:
        want, got = kv_cache_bytes(*args), fn(*args)
        if got != want:
            raise AssertionError(f"for (n_layers, n_kv_heads, d_head, seq_len, batch, bytes) = {args}: expected "
                                 f"{want:,} bytes, got {got!r}. Hint: K and V are both cached, in every layer.")
    print("Correct: your KV-cache arithmetic matches in every case.")
    return True
