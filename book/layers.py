"""Transformer building blocks, Chapters 6-8: the attention modules (multi-head, also as cross-attention;
grouped-query with a KV cache), feed-forward, LayerNorm and RMSNorm, and the blocks made of them
(TransformerBlock: Chapter 6's block, an encoder layer with causal=False; DecoderBlock: causal
self-attention + cross-attention + FFN). The GPT's own layer is book.models.GPTBlock.

Shape legend (batch first): B batch, T time (Tq queries, Tk keys when they differ),
C = d_model, H = n_heads, D = d_head = d_model // n_heads, F = d_ff.

Mask convention (as in book.attention and PyTorch's boolean attn_mask): True = may attend.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import attention, causal_mask, scaled_dot_product_attention, sliding_window_mask
from .positional import RotaryEmbedding

__all__ = [
    "MultiHeadAttention",
    "GroupedQueryAttention",
    "KVCache",
    "Int8KVCache",
    "quantize_int8",
    "kv_cache_bytes",
    "swiglu_hidden",
    "FeedForward",
    "LayerNorm",
    "RMSNorm",
    "TransformerBlock",
    "DecoderBlock",
    "block_params",
    "check_multi_head",
    "check_rms_norm",
    "check_kv_cache_bytes",
]

def relu_squared(x: torch.Tensor) -> torch.Tensor:
    """ReLU(x)^2 (So et al. 2021, Primer; modded-nanoGPT). Chapter 10."""
    return F.relu(x).square()


_ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu, "relu2": relu_squared, "swiglu": F.silu}
GATED = ("swiglu",)   # activations with a gate: up projects to 2 F, silu(gate) * value
_NORMS = ("pre", "post")


def _check_dims(d_model: int, n_heads: int) -> None:
    """Raise ValueError unless d_model and n_heads are positive ints with d_model % n_heads == 0."""
    for name, v in (("d_model", d_model), ("n_heads", n_heads)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if d_model % n_heads:
        raise ValueError(
            f"d_model must be divisible by n_heads (each head gets d_model // n_heads dims), "
            f"got d_model={d_model}, n_heads={n_heads}"
        )


def _check_dropout(p: float) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout must lie in [0, 1), got {p}")


def _autocast_enabled(device_type: str) -> bool:
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:  # torch < 2.4 takes no device type
        return torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled()


def _check_layer_mask(mask: Optional[torch.Tensor], B: int, H: int, Tq: int, Tk: int) -> None:
    """Raise unless a layer's mask is bool and unambiguously (Tq, Tk) or (B | 1, H | 1, Tq | 1, Tk | 1).

    A 2-D mask means (Tq, Tk), one mask for the whole batch. A (B, Tk) padding mask has the same shape
    when B == Tq and would silently be read as per-query, so 2-D masks are refused then (B > 1), and
    padding masks must come as (B, 1, 1, Tk) (see book.attention.padding_mask). Checks shapes only: no sync.
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


class MultiHeadAttention(nn.Module):
    """H heads of scaled dot-product attention in parallel, concatenated, then out_proj. Chapter 6.

    x (B, Tq, C), optional context (B, Tk, C) for cross-attention -> out (B, Tq, C);
    with need_weights=True returns (out, weights (B, H, Tq, Tk)). rope=True rotates queries and keys by their
    positions (RoPE, Chapter 5), so scores depend on how far apart two tokens are: self-attention only.
    """

    def __init__(self, d_model: int, n_heads: int, *, bias: bool = False, dropout: float = 0.0,
                 rope: bool = False, qk_norm: bool = False):
        super().__init__()
        _check_dims(d_model, n_heads)
        _check_dropout(dropout)
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.dropout = dropout
        self.rotary = RotaryEmbedding(self.d_head) if rope else None
        # QK-norm (Dehghani et al. 2023; OLMo 2, Gemma 3): RMSNorm each head's queries and keys, so no score
        # can grow without bound however large the projections get (Chapter 10)
        self.q_norm = nn.RMSNorm(self.d_head, eps=1e-6) if qk_norm else None
        self.k_norm = nn.RMSNorm(self.d_head, eps=1e-6) if qk_norm else None
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        B, T, _ = t.shape
        return t.view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)

    def _check_inputs(self, x: torch.Tensor, context: Optional[torch.Tensor]) -> None:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor of shape (B, T, {self.d_model}), got {type(x).__name__}")
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x should have shape (B, T, {self.d_model}), got {tuple(x.shape)}")
        if context is not None and (
            context.dim() != 3 or context.shape[0] != x.shape[0] or context.shape[-1] != self.d_model
        ):
            raise ValueError(
                f"context should have shape ({x.shape[0]}, Tk, {self.d_model}), got {tuple(context.shape)}"
            )
        want = self.q_proj.weight.dtype
        if not _autocast_enabled(x.device.type):  # under autocast, mixed dtypes are the point
            for name, t in (("x", x), ("context", context)):
                if t is not None and t.dtype != want:
                    raise TypeError(f"{name} has dtype {t.dtype} but the module's weights are {want}: "
                                    f"convert one of them (e.g. {name}.to({want}) or module.to({t.dtype}))")

    def _attend(self, q, k, v, mask, is_causal, need_weights):
        """Attention over (B, H, T, D) heads: fused fast path, or the written-out one that returns weights."""
        p = self.dropout if self.training else 0.0
        if not need_weights:
            return attention(q, k, v, mask=mask, is_causal=is_causal, dropout_p=p), None
        if is_causal:
            if mask is not None:
                raise ValueError("pass either mask or is_causal=True, not both")
            if q.shape[-2] != k.shape[-2]:
                raise ValueError(f"is_causal=True needs Tq == Tk, got Tq={q.shape[-2]}, Tk={k.shape[-2]}")
            mask = causal_mask(q.shape[-2], q.device)
        out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, Tq, D), (B, H, Tq, Tk)
        if p > 0:
            out = F.dropout(weights, p) @ v  # attention dropout, as in the fast path
        return out, weights

    def forward(self, x: torch.Tensor, context: Optional[torch.Tensor] = None,
                mask: Optional[torch.Tensor] = None, is_causal: bool = False, need_weights: bool = False):
        """x (B, Tq, C), context (B, Tk, C) or None (self-attention) -> out (B, Tq, C) [, weights (B, H, Tq, Tk)].

        mask: bool, True = may attend, shaped (Tq, Tk) or (B | 1, H | 1, Tq | 1, Tk | 1); a padding mask is
        (B, 1, 1, Tk) (book.attention.padding_mask). Every query must keep at least one key.
        """
        self._check_inputs(x, context)
        src = x if context is None else context
        B, Tq, C = x.shape
        _check_layer_mask(mask, B, self.n_heads, Tq, src.shape[1])
        q, k, v = self._split(self.q_proj(x)), self._split(self.k_proj(src)), self._split(self.v_proj(src))
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rotary is not None:
            if context is not None:
                raise ValueError("rope is for self-attention: queries and keys of cross-attention live on "
                                 "different sequences, so their distance means nothing")
            q, k = self.rotary(q), self.rotary(k)   # (B, H, T, D), rotated by position
        out, weights = self._attend(q, k, v, mask, is_causal, need_weights)  # (B, H, Tq, D)
        out = self.out_proj(out.transpose(1, 2).reshape(B, Tq, C))  # (B, H, Tq, D) -> (B, Tq, C)
        return (out, weights) if need_weights else out


class KVCache:
    """Keys and values of every layer for the tokens seen so far, preallocated to context_len. Chapter 7.

    k and v are (L, B, G, context_len, D); `length` tokens are filled. A layer calls update(layer, k, v)
    with its new (B, G, Tq, D) keys/values and gets back all (B, G, length + Tq, D) so far; the model
    calls advance(Tq) once every layer has written.
    """

    def __init__(self, n_layers: int, batch_size: int, n_kv_heads: int, context_len: int, d_head: int,
                 dtype=torch.float32, device=None):
        shape = (n_layers, batch_size, n_kv_heads, context_len, d_head)
        for name, n in zip(("n_layers", "batch_size", "n_kv_heads", "context_len", "d_head"), shape):
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ValueError(f"{name} must be a positive int, got {n!r}")
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.context_len, self.length = context_len, 0

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
        if end > self.context_len:
            raise ValueError(f"KV cache is full: {self.length} cached + {k.shape[-2]} new > context_len={self.context_len}")
        self.k[layer, :, :, self.length:end] = k
        self.v[layer, :, :, self.length:end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]

    def advance(self, n: int) -> None:
        """Mark n more tokens as cached (n >= 0, and never past context_len)."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"advance(n) needs an int n >= 0 (tokens just written), got {n!r}")
        if self.length + n > self.context_len:
            raise ValueError(f"cannot advance past context_len={self.context_len}: {self.length} cached + {n}")
        self.length += n

    @property
    def nbytes(self) -> int:
        """Memory the cache holds (both tensors, all context_len slots)."""
        return self.k.numel() * self.k.element_size() * 2


def kv_cache_bytes(n_layers: int, n_kv_heads: int, d_head: int, context_len: int, batch_size: int = 1,
                   bytes_per_value: int = 2) -> int:
    """Cache size: 2 (K and V) * layers * batch * kv heads * tokens * d_head * bytes. Chapter 7."""
    return 2 * n_layers * batch_size * n_kv_heads * context_len * d_head * bytes_per_value


def swiglu_hidden(d_model: int, multiple: int = 1) -> int:
    """F for a SwiGLU FFN with the parameters of a 4C one: 3 C F = 8 C^2, so F = 8C/3 (rounded down to
    `multiple`; LLaMA uses 256). Chapter 10."""
    f = 8 * d_model // 3
    return max(multiple, f // multiple * multiple)


def quantize_int8(t: torch.Tensor):
    """Symmetric INT8 per row of the last dim: (q int8, scale (..., 1) float) with t ~= q * scale. Chapter 10.

    Each key/value vector gets its own scale, max |t| / 127, so one outlier spoils only its own row."""
    scale = t.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8) / 127.0
    return torch.round(t / scale).clamp(-127, 127).to(torch.int8), scale


class Int8KVCache(KVCache):
    """A KVCache that stores keys and values as INT8 with one float scale per vector. Chapter 10.

    Same interface as KVCache; update() quantises the new keys/values and returns all of them dequantised.
    Memory: D bytes + one 2-byte scale per vector instead of 4 D (float32): 3.8x smaller at D = 32.
    """

    def __init__(self, n_layers: int, batch_size: int, n_kv_heads: int, context_len: int, d_head: int,
                 dtype=torch.float32, device=None):
        super().__init__(n_layers, batch_size, n_kv_heads, context_len, d_head, dtype=torch.int8, device=device)
        shape = self.k.shape[:-1] + (1,)
        self.dtype = dtype
        self.k_scale = torch.zeros(shape, dtype=torch.float16, device=device)
        self.v_scale = torch.zeros(shape, dtype=torch.float16, device=device)

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        end = self.length + k.shape[-2]
        (qk, sk), (qv, sv) = quantize_int8(k), quantize_int8(v)
        super().update(layer, qk, qv)   # checks shapes and room, stores the int8 values
        self.k_scale[layer, :, :, self.length:end] = sk.to(torch.float16)
        self.v_scale[layer, :, :, self.length:end] = sv.to(torch.float16)
        dq = [(q[layer, :, :, :end].to(self.dtype) * s[layer, :, :, :end].to(self.dtype))
              for q, s in ((self.k, self.k_scale), (self.v, self.v_scale))]
        return dq[0], dq[1]

    @property
    def nbytes(self) -> int:
        """Memory the cache holds: int8 values plus float16 scales, both tensors, all slots."""
        return (self.k.numel() + self.k_scale.numel() * 2) * 2


class GroupedQueryAttention(MultiHeadAttention):
    """Causal self-attention with H query heads sharing G key/value heads, and an optional KV cache. Chapter 7.

    x (B, T, C) -> (B, T, C). n_kv_heads = n_heads is plain multi-head attention; n_kv_heads = 1 is
    multi-query attention (Shazeer 2019); in between is grouped-query attention (Ainslie et al. 2023).
    k_proj and v_proj shrink to C -> G * D, so the cache shrinks by H / G.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: Optional[int] = None, *, bias: bool = False,
                 dropout: float = 0.0, rope: bool = False, qk_norm: bool = False, window: Optional[int] = None):
        super().__init__(d_model, n_heads, bias=bias, dropout=dropout, rope=rope, qk_norm=qk_norm)
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
            raise ValueError(f"window must be None (full causal attention) or a positive int, got {window!r}")
        self.window = window   # sliding-window attention: each query sees only its `window` latest keys
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
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        start = 0 if cache is None else cache.length
        if self.rotary is not None:   # new tokens sit at positions cache.length ..
            q, k = self.rotary(q, start), self.rotary(k, start)
        if cache is not None:
            if not is_causal or mask is not None:
                raise ValueError("with a KV cache, call with is_causal=True and no mask")
            k, v, mask, is_causal = self._extend_cache(k, v, cache, layer)  # k, v (B, G, Tk, D)
        if self.window is not None:
            if not is_causal and cache is None:
                raise ValueError("a sliding window is causal attention: call with is_causal=True")
            if mask is not None and mask.dim() != 2:
                raise ValueError("a sliding window combines only with the causal mask, not a custom mask")
            mask, is_causal = sliding_window_mask(T, k.shape[-2], self.window, start, x.device), False
        groups = self.n_heads // self.n_kv_heads
        if groups > 1:  # each kv head serves `groups` query heads
            k, v = (t.repeat_interleave(groups, dim=1) for t in (k, v))  # (B, G, Tk, D) -> (B, H, Tk, D)
        p = self.dropout if self.training else 0.0
        out = attention(q, k, v, mask=mask, is_causal=is_causal, dropout_p=p)  # (B, H, T, D)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, C))  # (B, H, T, D) -> (B, T, C)


class FeedForward(nn.Module):
    """Position-wise MLP: Linear(C -> F), activation, Linear(F -> C); F = 4C by default. Chapter 6.

    activation="swiglu" (Chapter 10) is gated: silu(x W_gate) * (x W_value), then Linear(F -> C); three
    C x F matrices instead of two, so F = swiglu_hidden(C) keeps the parameters of the 4C GELU FFN.

    x (..., C) -> (..., C). Every position is transformed independently with the same weights.
    """

    def __init__(self, d_model: int, d_ff: Optional[int] = None, activation: str = "gelu",
                 bias: bool = False, dropout: float = 0.0):
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        for name, v in (("d_model", d_model), ("d_ff", d_ff)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        _check_dropout(dropout)
        self.d_model, self.d_ff, self.activation = d_model, d_ff, activation
        # a gated FFN (SwiGLU, Shazeer 2020) projects up twice, to a gate and a value: up holds both, (2F, C)
        self.up = nn.Linear(d_model, 2 * d_ff if activation in GATED else d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x should have shape (..., {self.d_model}), got {tuple(x.shape)}")
        if self.activation in GATED:
            gate, value = self.up(x).chunk(2, dim=-1)  # (..., C) -> (..., F) twice
            h = _ACTIVATIONS[self.activation](gate) * value
        else:
            h = _ACTIVATIONS[self.activation](self.up(x))  # (..., C) -> (..., F)
        return self.drop(self.down(h))  # (..., F) -> (..., C)


class LayerNorm(nn.Module):
    """Normalise each position's C features to mean 0, variance 1, then scale and shift. Chapter 6.

    x (..., C) -> (..., C). Equal to nn.LayerNorm(C, eps); statistics never mix positions or batch items.
    The from-scratch version is Chapter 6's (layer_norm); this one calls F.layer_norm.
    """

    def __init__(self, d_model: int, eps: float = 1e-5, bias: bool = True):
        super().__init__()
        if not isinstance(d_model, int) or isinstance(d_model, bool) or d_model < 1:
            raise ValueError(f"d_model must be a positive int, got {d_model!r}")
        if not eps > 0:
            raise ValueError(f"eps must be positive, got {eps}")
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x should have shape (..., {self.d_model}), got {tuple(x.shape)}")
        # (x - mean) / sqrt(var + eps) * weight + bias, per position, with the biased variance: Chapter 6 writes it
        # out and checks it against this. Here PyTorch's fused kernel does it, with fewer, faster operations.
        return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)


class RMSNorm(nn.Module):
    """LayerNorm without the mean: x / sqrt(mean(x^2) + eps) * weight (Zhang & Sennrich 2019; LLaMA). Chapter 6.

    x (..., C) -> (..., C). Equal to nn.RMSNorm(C, eps).
    """

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        if not isinstance(d_model, int) or isinstance(d_model, bool) or d_model < 1:
            raise ValueError(f"d_model must be a positive int, got {d_model!r}")
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x should have shape (..., {self.d_model}), got {tuple(x.shape)}")
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class TransformerBlock(nn.Module):
    """Attention + FFN, each wrapped in a residual connection and LayerNorm (pre or post). Chapter 6.

    x (B, T, C) -> (B, T, C). norm="pre": x + f(LN(x)) (GPT-2); norm="post": LN(x + f(x)) (Vaswani 2017, BERT).
    The flags residual / use_ffn / use_norm switch parts off for the chapter's ablation ladder; eps is the
    LayerNorms' (BERT's checkpoints use 1e-12). forward(x, need_weights=True) -> (out, weights (B, H, T, T)).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: Optional[int] = None, *, norm: str = "pre",
                 causal: bool = True, bias: bool = False, dropout: float = 0.0, residual: bool = True,
                 use_ffn: bool = True, use_norm: bool = True, activation: str = "gelu", rope: bool = False,
                 eps: float = 1e-5):
        super().__init__()
        if norm not in _NORMS:
            raise ValueError(f"norm must be one of {_NORMS}, got {norm!r}")
        self.norm, self.causal, self.residual = norm, causal, residual
        self.use_ffn, self.use_norm = use_ffn, use_norm
        self.attn = MultiHeadAttention(d_model, n_heads, bias=bias, dropout=dropout, rope=rope)
        self.ffn = FeedForward(d_model, d_ff, activation, bias=bias, dropout=dropout) if use_ffn else None
        self.ln1 = LayerNorm(d_model, eps) if use_norm else nn.Identity()
        self.ln2 = LayerNorm(d_model, eps) if (use_norm and use_ffn) else nn.Identity()
        self.resid_drop = nn.Dropout(dropout)

    def _sublayer(self, x: torch.Tensor, f, ln: nn.Module) -> torch.Tensor:
        """One residual sub-layer: pre x + f(ln(x)), post ln(x + f(x)); no residual drops the `x +`."""
        if self.norm == "pre":
            y = self.resid_drop(f(ln(x)))
            return x + y if self.residual else y
        y = self.resid_drop(f(x))
        return ln(x + y if self.residual else y)

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None, need_weights: bool = False):
        if x.dim() != 3 or x.shape[-1] != self.attn.d_model:
            raise ValueError(f"x should have shape (B, T, {self.attn.d_model}), got {tuple(x.shape)}")
        _check_layer_mask(mask, x.shape[0], self.attn.n_heads, x.shape[1], x.shape[1])
        if mask is not None and self.causal:
            mask = mask & causal_mask(x.shape[1], x.device)  # both: causal and the given mask
        is_causal = self.causal and mask is None
        weights = []

        def attend(h):
            out = self.attn(h, mask=mask, is_causal=is_causal, need_weights=need_weights)
            if need_weights:
                weights.append(out[1])   # (B, H, T, T)
                return out[0]
            return out

        x = self._sublayer(x, attend, self.ln1)
        if self.ffn is not None:
            x = self._sublayer(x, self.ffn, self.ln2)
        return (x, weights[0]) if need_weights else x


class DecoderBlock(nn.Module):
    """The encoder-decoder's decoder layer: causal self-attention, cross-attention, FFN. Chapter 8.

    x (B, T, C) (the target so far), memory (B, S, C) (the encoder's output) -> (B, T, C). Each sub-layer
    has a residual connection and a LayerNorm: norm="post" LN(x + f(x)) as in the paper and
    nn.TransformerDecoderLayer, or norm="pre" x + f(LN(x)). Cross-attention takes its queries from the
    decoder and its keys and values from memory, so its weights are (B, H, T, S). memory_mask is a keep
    mask over the source, (B, S) or broadcastable to (B, H, T, S), True = may attend (real tokens).
    With a KVCache (one layer per block), x holds only the new target tokens: the self-attention reads the
    cached keys and values; memory is the same every step (encode once, reuse).
    An encoder layer is TransformerBlock(causal=False); the GPT's layer is models.GPTBlock.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: Optional[int] = None, *, norm: str = "post",
                 bias: bool = True, dropout: float = 0.0, activation: str = "relu", rope: bool = False):
        super().__init__()
        if norm not in _NORMS:
            raise ValueError(f"norm must be one of {_NORMS}, got {norm!r}")
        self.norm = norm
        self.self_attn = GroupedQueryAttention(d_model, n_heads, bias=bias, dropout=dropout, rope=rope)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, bias=bias, dropout=dropout)
        self.ffn = FeedForward(d_model, d_ff, activation, bias=bias, dropout=dropout)
        self.ln1, self.ln2, self.ln3 = LayerNorm(d_model), LayerNorm(d_model), LayerNorm(d_model)
        self.resid_drop = nn.Dropout(dropout)

    def _sublayer(self, x: torch.Tensor, f, ln: nn.Module) -> torch.Tensor:
        if self.norm == "pre":
            return x + self.resid_drop(f(ln(x)))
        return ln(x + self.resid_drop(f(x)))

    def forward(self, x: torch.Tensor, memory: torch.Tensor, memory_mask: Optional[torch.Tensor] = None,
                cache: Optional[KVCache] = None, layer: int = 0, need_weights: bool = False):
        """-> out (B, T, C); with need_weights=True (out, cross-attention weights (B, H, T, S))."""
        C = self.cross_attn.d_model
        if x.dim() != 3 or x.shape[-1] != C:
            raise ValueError(f"x should have shape (B, T, {C}), got {tuple(x.shape)}")
        if memory.dim() != 3 or memory.shape[0] != x.shape[0] or memory.shape[-1] != C:
            raise ValueError(f"memory should have shape ({x.shape[0]}, S, {C}) (the encoder's output), "
                             f"got {tuple(memory.shape)}")
        if memory_mask is not None and memory_mask.dim() == 2:
            if memory_mask.shape != memory.shape[:2]:
                raise ValueError(f"memory_mask (B, S) should have shape {tuple(memory.shape[:2])}, "
                                 f"got {tuple(memory_mask.shape)}")
            memory_mask = memory_mask[:, None, None, :]  # (B, S) -> (B, 1, 1, S): the same for every query
        x = self._sublayer(x, lambda h: self.self_attn(h, is_causal=True, cache=cache, layer=layer), self.ln1)
        weights = []

        def cross(h):
            out = self.cross_attn(h, memory, mask=memory_mask, need_weights=need_weights)
            if need_weights:
                weights.append(out[1])
                return out[0]
            return out

        x = self._sublayer(x, cross, self.ln2)
        x = self._sublayer(x, self.ffn, self.ln3)
        return (x, weights[0]) if need_weights else x


def block_params(d_model: int, d_ff: Optional[int] = None) -> int:
    """Weights of one bias-free block, attention 4C^2 + FFN 2CF (= 12C^2 when F = 4C), norms ignored. Chapter 6."""
    d_ff = 4 * d_model if d_ff is None else d_ff
    return 4 * d_model * d_model + 2 * d_model * d_ff


def check_multi_head(fn, seed: int = 0) -> bool:
    """Self-check for the chapter 6 exercise: does `fn(x, mha)` compute mha(x) with a loop over heads?

    `fn` gets x (B, T, C) and a MultiHeadAttention `mha` (no mask) and should return out (B, T, C) using
    only mha.q_proj, k_proj, v_proj, out_proj weights. Tried with B=2, T=5, C=12, H=3.
    """
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    mha = MultiHeadAttention(12, 3)
    x = torch.randn(2, 5, 12, generator=g)
    with torch.no_grad():
        want, got = mha(x), fn(x, mha)
    if tuple(got.shape) != (2, 5, 12):
        raise AssertionError(f"output should have shape (2, 5, 12) = (B, T, C), got {tuple(got.shape)}")
    if not torch.allclose(got, want, atol=1e-5, rtol=1e-4):
        raise AssertionError("values differ from MultiHeadAttention. Hints: head h uses rows h*D:(h+1)*D of "
                             "each projection weight; scale by sqrt(D), not sqrt(C); concatenate, then out_proj.")
    print("Correct: your loop over heads computes exactly what the batched MultiHeadAttention computes.")
    return True


def check_rms_norm(fn, seed: int = 0) -> bool:
    """Self-check for the chapter 6 exercise: does `fn(x, weight, eps)` compute RMSNorm over the last dim?"""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 5, 8, generator=g) * 3 + 1
    w = torch.randn(8, generator=g)
    want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    got = fn(x, w, 1e-6)
    if tuple(got.shape) != tuple(x.shape):
        raise AssertionError(f"output should have shape {tuple(x.shape)}, got {tuple(got.shape)}")
    if not torch.allclose(got, want, atol=1e-5, rtol=1e-4):
        hint = "do not subtract the mean" if torch.allclose(got, F.layer_norm(x, (8,), w, None, 1e-6),
                                                           atol=1e-5) else "divide by sqrt(mean(x^2) + eps)"
        raise AssertionError(f"values differ from RMSNorm over the last dim. Hint: {hint}, then scale by weight.")
    print("Correct: your RMSNorm matches the reference.")
    return True


def check_kv_cache_bytes(fn) -> bool:
    """Self-check for the chapter 7 exercise: fn(n_layers, n_kv_heads, d_head, context_len, batch_size, bytes)."""
    cases = [(32, 8, 128, 8192, 1, 2), (4, 4, 32, 64, 3, 4), (80, 8, 128, 4096, 2, 2), (2, 1, 5, 7, 1, 1)]
    for args in cases:
        want, got = kv_cache_bytes(*args), fn(*args)
        if got != want:
            raise AssertionError(f"for (n_layers, n_kv_heads, d_head, context_len, batch, bytes) = {args}: expected "
                                 f"{want:,} bytes, got {got!r}. Hint: K and V are both cached, in every layer.")
    print("Correct: your KV-cache arithmetic matches in every case.")
    return True
