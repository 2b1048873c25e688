"""Attention: the maths (Chapter 4) and the one attention module of the book (Chapters 6-10).

The functions: masks (`causal_mask`, `padding_mask`, `sliding_window_mask`), the teaching version that returns
its weights (`scaled_dot_product_attention`) and the fused fast path (`attention`).
The module: `Attention`, multi-head attention with H query heads and G key/value heads (G = H: multi-head,
Chapter 6; G < H: grouped-query, Chapter 7), as self-attention or cross-attention (Chapter 8), causal or not,
with a KV cache (Chapter 7), RoPE (Chapter 5), QK-norm and a sliding window (Chapter 10). Every block and model
of the book (book.blocks, book.gpt, book.bert, book.transformer) uses it. `to_torch_mha` copies one into
PyTorch's nn.MultiheadAttention.

Shape legend (batch first): B batch, T time (Tq queries, Tk keys when they differ),
C = d_model, H heads, D head dim (Dv for values when it differs). Leading dims `...` are any
batch dims, e.g. (B, H).

Mask convention everywhere in the book (the same as PyTorch's boolean `attn_mask`):
True = keep (query i may look at key j), False = blocked (its weight is exactly 0).
"""
from __future__ import annotations

import math
from typing import Optional, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import _get_current_dispatch_mode

from .checks import (allocating, divides, inputs_checked, optional_positive_int, positive_int, probability,
                     token_ids, values_checked)
from .positional import RotaryEmbedding

__all__ = [
    "causal_mask",
    "padding_mask",
    "sliding_window_mask",
    "scaled_dot_product_attention",
    "attention",
    "Attention",
    "to_torch_mha",
    "OneLayerAttention",
]


def causal_mask(T: int, device=None) -> torch.Tensor:
    """Boolean (T, T) mask, True where query i may attend to key j (j <= i). Chapter 4.

    Example: causal_mask(3) -> [[T, F, F], [T, T, F], [T, T, T]]
    """
    positive_int(T=T)
    with allocating("a (T, T) mask of bools", T=T):
        return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def sliding_window_mask(Tq: int, Tk: Optional[int] = None, window: int = 1, start: Optional[int] = None,
                        device=None) -> torch.Tensor:
    """(Tq, Tk) bool: query i (at position start + i) may see key j iff 0 <= (start + i) - j < window. Chapter 10.

    Causal attention limited to the `window` latest keys, the query's own included (Mistral, Gemma 2,
    GPT-OSS). Tk defaults to Tq and start to Tk - Tq (the queries are the last Tq positions)."""
    Tk = Tq if Tk is None else Tk
    start = Tk - Tq if start is None else start
    positive_int(Tq=Tq, Tk=Tk, window=window)
    if start + Tq > Tk or start < 0:
        raise ValueError(f"queries at positions {start}..{start + Tq - 1} need keys up to there, got Tk={Tk}")
    return _causal_keep(Tq, Tk, start, window, device)


def _causal_keep(Tq: int, Tk: int, start: int, window: Optional[int], device=None) -> torch.Tensor:
    """(Tq, Tk) bool: query i sits at position start + i and may see keys j <= start + i (and, with a window,
    only the `window` latest of them). start > 0 when the queries come after cached keys."""
    gap = (start + torch.arange(Tq, device=device))[:, None] - torch.arange(Tk, device=device)  # (Tq, Tk)
    return gap >= 0 if window is None else (gap >= 0) & (gap < window)


def padding_mask(lengths: torch.Tensor, T: int) -> torch.Tensor:
    """Boolean (B, 1, 1, T) key mask, True for the first lengths[b] keys of sequence b. Chapter 4.

    Broadcasts against attention scores (B, H, Tq, Tk). Example: lengths [2], T=3 -> [[[[T, T, F]]]]
    """
    positive_int(T=T)
    if not isinstance(lengths, torch.Tensor) or lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        got = lengths.dtype if isinstance(lengths, torch.Tensor) else type(lengths).__name__
        raise TypeError(f"lengths must be an integer tensor of shape (B,), got {got}")
    if lengths.dim() != 1:
        raise ValueError(f"lengths should have shape (B,), got {tuple(lengths.shape)}")
    if (lengths < 0).any() or (lengths > T).any():
        raise ValueError(f"lengths must lie in [0, {T}], got {lengths.tolist()}")
    keep = torch.arange(T, device=lengths.device)[None, :] < lengths[:, None]  # (B, T)
    return keep[:, None, None, :]


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Raise ValueError unless q (..., Tq, D), k (..., Tk, D), v (..., Tk, Dv) fit together."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() < 2:
            raise ValueError(f"{name} should have shape (..., T, D), got {tuple(t.shape)}")
    if not q.dtype.is_floating_point or not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share one floating-point dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must share the last dim D: q (..., Tq, D) and k (..., Tk, D), "
            f"got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of keys Tk: k (..., Tk, D) and v (..., Tk, Dv), "
            f"got k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    try:
        torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(f"q, k and v must share their leading (batch, head) dims (...), or broadcast: got q "
                         f"{tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)}") from None


def _check_mask(mask: torch.Tensor, Tq: int, Tk: int) -> None:
    """Raise ValueError unless mask is boolean, broadcastable to (..., Tq, Tk), and leaves every query a key.

    A query row whose keys are all blocked would get NaN weights (softmax over nothing). That is almost
    always a mask in the opposite convention (True = padding, as nn.Transformer's key_padding_mask), so
    it is an error here rather than silent NaN.
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a bool torch.Tensor (True = may attend), got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor (True = keep), got dtype {mask.dtype}")
    if mask.dim() < 2 or mask.shape[-2] not in (1, Tq) or mask.shape[-1] not in (1, Tk):
        raise ValueError(
            f"mask should broadcast to (..., Tq, Tk) = (..., {Tq}, {Tk}), got {tuple(mask.shape)}"
        )
    if values_checked():   # inside inputs_checked() (a model checked its mask at its entrance) or while tracing
        return
    blocked_rows = ~mask.any(dim=-1)  # (..., Tq or 1): True where a query may attend to no key at all
    if blocked_rows.any():
        n = int(blocked_rows.sum())
        raise ValueError(
            f"mask blocks every key for {n} query row(s), whose attention weights would be NaN. "
            "The convention here is True = may attend (keep), False = blocked; a mask that is True at "
            "padding (nn.Transformer's key_padding_mask) must be inverted with ~mask first"
        )


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor] = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(D)) v, written out; returns (out, weights). Chapter 4.

    q (..., Tq, D), k (..., Tk, D), v (..., Tk, Dv), mask bool broadcastable to (..., Tq, Tk),
    True = keep. Returns out (..., Tq, Dv) and weights (..., Tq, Tk); blocked weights are exactly 0.
    A mask that blocks every key of some query is rejected with a ValueError (its softmax would be NaN,
    as in PyTorch's math path): it is usually a mask in the opposite convention, True = padding. So are scores
    that are not finite (q and k so large that q @ k^T overflows, or NaN in them).
    """
    _check_qkv(q, k, v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, D) @ (..., D, Tk) -> (..., Tq, Tk)
    if mask is not None:
        _check_mask(mask, q.shape[-2], k.shape[-2])
        scores = scores.masked_fill(~mask, float("-inf"))  # exp(-inf) = 0: blocked keys get no weight
    weights = scores.softmax(dim=-1)  # each row sums to 1 over the keys
    # at a reader's call (a model checks its inputs once), and not while an operation counter watches (chapter 4
    # counts this function's operations: a check would be counted as attention's work)
    if not values_checked() and _get_current_dispatch_mode() is None and bool(weights.isnan().any()):
        big = f"largest |q| {q.abs().max().item():.3g}, |k| {k.abs().max().item():.3g}"
        what = ("q or k hold NaN or inf" if not (torch.isfinite(q).all() and torch.isfinite(k).all()) else
                f"q @ k^T overflowed {q.dtype} ({big})")
        raise ValueError(f"attention scores are not finite: {what}, so the softmax is NaN; scale q and k down "
                         f"(or normalise them, as QK-norm does)")
    return weights @ v, weights  # (..., Tq, Tk) @ (..., Tk, Dv) -> (..., Tq, Dv)


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: Optional[torch.Tensor] = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Fast path: PyTorch's fused scaled dot-product attention; returns out (..., Tq, Dv). Chapter 4.

    Same maths and mask convention (bool, True = keep) as `scaled_dot_product_attention`, but the
    (Tq, Tk) weight matrix is never returned (and, on flash/memory-efficient kernels, never stored).
    Pass either `mask` or `is_causal=True`, not both. `dropout_p` applies attention dropout (training).
    """
    _check_qkv(q, k, v)
    if mask is not None and is_causal:
        raise ValueError("pass either mask or is_causal=True, not both (build the combined mask yourself)")
    if mask is not None:
        _check_mask(mask, q.shape[-2], k.shape[-2])
    if is_causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"is_causal=True needs as many queries as keys (Tq == Tk), got Tq={q.shape[-2]}, "
                         f"Tk={k.shape[-2]}; for queries that come after cached keys, build the mask yourself")
    probability(dropout_p=dropout_p)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)


# ---- the module ------------------------------------------------------------------------------------------------

def _autocast_enabled(device_type: str) -> bool:
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:  # torch < 2.4 takes no device type
        return torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled()


def _check_layer_mask(mask: Optional[torch.Tensor], B: int, H: int, Tq: int, Tk: int) -> None:
    """Raise unless a layer's mask is bool and unambiguously (Tq, Tk) or (B | 1, H | 1, Tq | 1, Tk | 1).

    A 2-D mask means (Tq, Tk), one mask for the whole batch. A (B, Tk) padding mask has the same shape
    when B == Tq and would silently be read as per-query, so 2-D masks are refused then (B > 1), and
    padding masks must come as (B, 1, 1, Tk) (see padding_mask). Checks shapes here; `attention()` and
    `scaled_dot_product_attention` then check that every query keeps a key (one device sync).
    """
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a bool torch.Tensor (True = may attend), got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor (True = may attend), got dtype {mask.dtype}; "
                         "convert a 0/1 mask m with m.bool(), PyTorch's additive float mask (0 = attend, "
                         "-inf = blocked) with m == 0")
    shape = tuple(mask.shape)
    padding_hint = (f"a (B, Tk) padding mask must be passed as (B, 1, 1, Tk) = ({B}, 1, 1, {Tk}), "
                    "e.g. mask[:, None, None, :] or book.attention.padding_mask(lengths, T)")
    if mask.dim() == 2:
        if B > 1 and shape[0] == B == Tq:
            raise ValueError(f"a 2-D mask of shape {shape} is ambiguous when the batch size B = {B} equals "
                             f"Tq = {Tq}: it could be a (Tq, Tk) mask or a (B, Tk) padding mask. Pass a "
                             f"(Tq, Tk) mask as (1, 1, Tq, Tk), e.g. mask[None, None]; {padding_hint}")
        if B > 1 and shape[0] == B:
            raise ValueError(f"a 2-D mask must be (Tq, Tk) = ({Tq}, {Tk}), got {shape}; {padding_hint}")
    elif mask.dim() == 4:
        if shape[0] not in (1, B) or shape[1] not in (1, H):
            raise ValueError(f"a 4-D mask must be (B | 1, H | 1, Tq | 1, Tk | 1) with B = {B}, H = {H}, "
                             f"Tq = {Tq}, Tk = {Tk}, got {shape}")
    else:
        raise ValueError(f"mask must be 2-D (Tq, Tk) or 4-D (B, H, Tq, Tk) (size-1 dims broadcast), got "
                         f"{mask.dim()}-D {shape}")
    if shape[-2] not in (1, Tq) or shape[-1] not in (1, Tk):
        raise ValueError(f"mask should broadcast to (..., Tq, Tk) = (..., {Tq}, {Tk}) (Tk counts cached keys too), "
                         f"got {shape}")


class Attention(nn.Module):
    """Multi-head attention with H query heads and G key/value heads, self- or cross-attention. Chapters 6-10.

    x (B, Tq, C), optional context (B, S, C) -> out (B, Tq, C), or (out, weights (B, H, Tq, Tk)) when asked.
    n_kv_heads = G: None (= H) is multi-head attention (Chapter 6); 1 is multi-query attention (Shazeer 2019);
    in between is grouped-query attention (Ainslie et al. 2023, Chapter 7). k_proj and v_proj map C -> G * D,
    each kv head serves H / G query heads, and a KV cache shrinks by H / G.
    rope (True, or one RotaryEmbedding shared by every layer) rotates queries and keys by their positions
    (Chapter 5); qk_norm RMS-normalises each head's queries and keys; window limits causal attention to the
    `window` latest keys (Chapter 10).
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: Optional[int] = None, *, bias: bool = False,
                 dropout: float = 0.0, rope: Union[bool, RotaryEmbedding] = False, qk_norm: bool = False,
                 window: Optional[int] = None):
        super().__init__()
        positive_int(d_model=d_model, n_heads=n_heads)
        divides("n_heads", n_heads, "d_model", d_model)   # each head gets D = d_model // n_heads dims
        n_kv_heads = n_heads if n_kv_heads is None else positive_int(n_kv_heads=n_kv_heads)
        divides("n_kv_heads", n_kv_heads, "n_heads", n_heads)   # each kv head serves H / G query heads
        self.d_model, self.n_heads, self.n_kv_heads, self.d_head = d_model, n_heads, n_kv_heads, d_model // n_heads
        self.dropout = probability(dropout=dropout)
        self.window = optional_positive_int(window=window)   # None: every earlier key
        self.rotary = rope if isinstance(rope, RotaryEmbedding) else RotaryEmbedding(self.d_head) if rope else None
        # QK-norm (Dehghani et al. 2023; OLMo 2, Gemma 3): no score can grow without bound (Chapter 10)
        self.q_norm = nn.RMSNorm(self.d_head, eps=1e-6) if qk_norm else None
        self.k_norm = nn.RMSNorm(self.d_head, eps=1e-6) if qk_norm else None
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)                       # C -> H * D
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)      # C -> G * D
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)      # C -> G * D
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)                     # H * D -> C

    def forward(self, x: torch.Tensor, context: Optional[torch.Tensor] = None, *, causal: bool,
                mask: Optional[torch.Tensor] = None, cache=None, layer: int = 0, need_weights: bool = False):
        """x (B, Tq, C); context (B, S, C) for cross-attention, None for self-attention -> out (B, Tq, C).

        causal (required): True lets query i see keys 0..i only (with a cache: the cached keys too). mask: bool,
        True = may attend, (Tq, Tk) or (B | 1, H | 1, Tq | 1, Tk | 1), e.g. a (B, 1, 1, Tk) padding mask; it is
        combined (&) with the causal mask and the window. cache: a book.kv_cache.KVCache; x then holds only the
        new tokens, which sit at positions cache.length ...; `layer` is this layer's slot in it (the model
        advances the cache once every layer has written). need_weights=True -> (out, weights (B, H, Tq, Tk)).
        """
        self._check_inputs(x, context, causal, cache)
        B, Tq, C = x.shape
        src = x if context is None else context
        start = 0 if cache is None else cache.length       # the new tokens sit at positions start ..
        Tk = start + src.shape[1]                          # keys: the cached ones, then the new ones
        _check_layer_mask(mask, B, self.n_heads, Tq, Tk)
        q = self.q_proj(x).view(B, Tq, self.n_heads, self.d_head).transpose(1, 2)             # (B, H, Tq, D)
        k = self.k_proj(src).view(B, -1, self.n_kv_heads, self.d_head).transpose(1, 2)        # (B, G, S, D)
        v = self.v_proj(src).view(B, -1, self.n_kv_heads, self.d_head).transpose(1, 2)        # (B, G, S, D)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rotary is not None:
            q, k = self.rotary(q, start), self.rotary(k, start)   # rotated by their positions start ..
        if cache is not None:
            k, v = cache.update(layer, k, v)               # (B, G, Tk, D): the cached keys and values, then these
        # a plain causal mask and nothing else: the fused kernel applies it itself (flash attention)
        fused_causal = causal and Tq > 1 and start == 0 and mask is None and self.window is None and not need_weights
        # otherwise the mask: causal (after the cached keys), window and the caller's, combined; None = every key
        keep = mask
        if causal and not fused_causal and (Tq > 1 or self.window is not None):   # a lone new token sees all
            rule = _causal_keep(Tq, Tk, start, self.window, x.device)   # (Tq, Tk)
            keep = rule if mask is None else mask & rule
        if self.n_kv_heads < self.n_heads:   # each kv head serves H / G query heads
            k, v = (t.repeat_interleave(self.n_heads // self.n_kv_heads, dim=1) for t in (k, v))  # (B, H, Tk, D)
        if mask is not None and not values_checked():   # a caller's mask must leave every query a key (one device
            _check_mask(keep, Tq, Tk)                       # sync); ours always do; a model checks it at its entrance
        p = self.dropout if self.training else 0.0
        if need_weights:   # written out, as Chapter 4's scaled_dot_product_attention: weights (B, H, Tq, Tk)
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
            if keep is not None:
                scores = scores.masked_fill(~keep, float("-inf"))
            weights = scores.softmax(dim=-1)
            out = (F.dropout(weights, p) if p > 0 else weights) @ v   # attention dropout, as the fused kernel's
        else:   # PyTorch's fused kernel (flash attention where it can); the weights are never stored
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p, is_causal=fused_causal)
            weights = None
        out = self.out_proj(out.transpose(1, 2).reshape(B, Tq, C))   # (B, H, Tq, D) -> (B, Tq, C)
        return (out, weights) if need_weights else out

    def _check_inputs(self, x, context, causal, cache) -> None:
        if not isinstance(causal, bool):
            raise TypeError(f"causal must be True (query i sees keys 0..i) or False (every key), got {causal!r}")
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor of shape (B, T, {self.d_model}), got {type(x).__name__}")
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x should have shape (B, T, {self.d_model}), got {tuple(x.shape)}")
        if context is not None:
            if not isinstance(context, torch.Tensor) or context.dim() != 3 or context.shape[0] != x.shape[0] \
                    or context.shape[-1] != self.d_model:
                got = tuple(context.shape) if isinstance(context, torch.Tensor) else type(context).__name__
                raise ValueError(f"context should have shape ({x.shape[0]}, S, {self.d_model}), got {got}")
            for what, bad in (("causal=True", causal), ("rope", self.rotary is not None), ("a window", self.window),
                              ("a KV cache", cache is not None)):
                if bad:
                    raise ValueError(f"cross-attention (with context) takes no {what}: its queries and keys live "
                                     "on different sequences, so their positions cannot be compared")
        if cache is not None and not causal:
            raise ValueError("a KV cache serves causal self-attention (earlier tokens never see later ones): "
                             "call with causal=True")
        if self.window is not None and not causal:
            raise ValueError("a sliding window is causal attention over the latest keys: call with causal=True")
        want = self.q_proj.weight.dtype
        if not _autocast_enabled(x.device.type):  # under autocast, mixed dtypes are the point
            for name, t in (("x", x), ("context", context)):
                if t is not None and t.dtype != want:
                    raise TypeError(f"{name} has dtype {t.dtype} but the module's weights are {want}: "
                                    f"convert one of them (e.g. {name}.to({want}) or module.to({t.dtype}))")


class OneLayerAttention(nn.Module):
    """Embedding (+ the left neighbour's) -> one causal self-attention layer -> linear read-out. Chapter 4.

    x (B, T) ids -> logits (B, T, vocab_size); the weights (B, T, T) stay in `self.weights`. The key at position j
    is made from position j-1's vector (a key that says "the thing before me was ..."), the value from the token
    itself: the architecture makes a previous-token lookup learnable. scaled=False leaves out the 1/sqrt(d) of the
    scores (Chapter 4's experiment on the scale).
    """

    def __init__(self, vocab_size: int, d: int = 32, scaled: bool = True):
        super().__init__()
        positive_int(vocab_size=vocab_size, d=d)
        self.embed, self.left_embed = nn.Embedding(vocab_size, d), nn.Embedding(vocab_size, d)
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.head = nn.Linear(d, vocab_size)
        self.q_gain = 1.0 if scaled else math.sqrt(d)   # sqrt(d) q . k / sqrt(d) = the raw dot product

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        token_ids(x, self.embed.num_embeddings, "x")
        if x.dim() != 2:
            raise ValueError(f"x should have shape (B, T), got {tuple(x.shape)}")
        shift = lambda t: F.pad(t, (0, 0, 1, 0))[:, :-1]                # position j gets j-1's vector
        h = self.embed(x) + shift(self.left_embed(x))                   # (B, T, d)
        with inputs_checked():                     # checked above, once: no value check inside (a NaN run stays NaN)
            out, self.weights = scaled_dot_product_attention(
                self.q_gain * self.q_proj(h), self.k_proj(shift(h)), self.v_proj(self.embed(x)),
                causal_mask(x.shape[1], x.device))
        return self.head(out)                                           # (B, T, vocab)


def to_torch_mha(attn: nn.Module, bias: Optional[bool] = None) -> nn.MultiheadAttention:
    """PyTorch's nn.MultiheadAttention (batch first) holding `attn`'s weights. Chapter 6.

    PyTorch stacks the q, k, v projections into one in_proj_weight (3C, C); we keep three. `attn` is an
    Attention, or any module with q_proj, k_proj, v_proj, out_proj and n_heads (Chapter 6's own). bias: give
    the copy bias vectors (zero where `attn` has none); default: as `attn`. Its mask convention is the
    opposite of ours: pass attn_mask=~keep.
    """
    H = attn.n_heads
    extras = (getattr(attn, "n_kv_heads", H) != H, getattr(attn, "rotary", None) is not None,
              getattr(attn, "q_norm", None) is not None, getattr(attn, "window", None) is not None)
    if any(extras):
        raise ValueError("nn.MultiheadAttention has no kv-head groups, RoPE, QK-norm or window: "
                         "only plain multi-head attention can be copied into it")
    projs = [attn.q_proj, attn.k_proj, attn.v_proj]
    mine = attn.q_proj.bias is not None
    bias = mine if bias is None else bias
    w = attn.q_proj.weight
    ref = nn.MultiheadAttention(w.shape[1], H, dropout=getattr(attn, "dropout", 0.0), bias=bias, batch_first=True,
                                device=w.device, dtype=w.dtype)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([p.weight for p in projs]))
        ref.out_proj.weight.copy_(attn.out_proj.weight)
        if bias:
            ref.in_proj_bias.copy_(torch.cat([p.bias for p in projs]) if mine else 0)
            ref.out_proj.bias.copy_(attn.out_proj.bias if mine else 0)
    return ref.train(attn.training)
