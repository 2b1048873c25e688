"""The KV cache: keys and values of the tokens seen so far, so that generation computes each token once. Chapter 7.

Shape legend: L layers, B batch, G key/value heads (n_kv_heads), D head dim, context_len slots per sequence.

`KVCache` keeps them as they come (float32, float16, ...); `Int8KVCache` (Chapter 10) stores each key and value
vector as INT8 with one float16 scale, about 4x smaller than float32. Both take and return keys and values of
`dtype`; only where they keep them differs. `kv_cache_bytes` is the arithmetic of Chapter 7's table.
book.attention.Attention reads and extends a cache through `length` and `update`; the model calls `advance`.
"""
from __future__ import annotations

import torch

from .checks import positive_int, positive_number

__all__ = ["KVCache", "Int8KVCache", "quantize_int8", "kv_cache_bytes"]


class KVCache:
    """Keys and values of every layer for the tokens seen so far, preallocated to context_len. Chapter 7.

    k and v are (L, B, G, context_len, D); `length` tokens are filled. A layer calls update(layer, k, v)
    with its new (B, G, Tq, D) keys/values and gets back all (B, G, length + Tq, D) so far; the model
    calls advance(Tq) once every layer has written. dtype: of the keys and values it takes and returns
    (here also the dtype it stores).
    """

    storage_dtype = None   # None: store keys and values in `dtype` itself

    def __init__(self, n_layers: int, batch_size: int, n_kv_heads: int, context_len: int, d_head: int,
                 dtype=torch.float32, device=None):
        positive_int(n_layers=n_layers, batch_size=batch_size, n_kv_heads=n_kv_heads, context_len=context_len,
                     d_head=d_head)
        shape = (n_layers, batch_size, n_kv_heads, context_len, d_head)
        self.dtype = dtype
        self.k = torch.zeros(shape, dtype=self.storage_dtype or dtype, device=device)
        self.v = torch.zeros(shape, dtype=self.storage_dtype or dtype, device=device)
        self.context_len, self.length = context_len, 0

    def _store(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> int:
        """Check shapes and room, write k, v (B, G, Tq, D) after the cached tokens; return the new end."""
        L, B, G, _, D = self.k.shape
        if not isinstance(layer, int) or isinstance(layer, bool) or not 0 <= layer < L:
            raise IndexError(f"layer must be an int in [0, {L}) (the cache holds {L} layers), got {layer!r}")
        for name, t in (("k", k), ("v", v)):
            if t.dim() != 4 or (t.shape[0], t.shape[1], t.shape[3]) != (B, G, D) or t.shape[2] != k.shape[2]:
                raise ValueError(f"{name} should have shape (B, G, Tq, D) = ({B}, {G}, Tq, {D}) to fit this "
                                 f"cache, got {tuple(t.shape)}")
        end = self.length + k.shape[-2]
        if end > self.context_len:
            raise ValueError(f"KV cache is full: {self.length} cached + {k.shape[-2]} new > "
                             f"context_len={self.context_len}")
        self.k[layer, :, :, self.length:end] = k
        self.v[layer, :, :, self.length:end] = v
        return end

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Store new keys/values (B, G, Tq, D) after the cached ones; return all of them so far."""
        end = self._store(layer, k, v)
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
    positive_int(n_layers=n_layers, n_kv_heads=n_kv_heads, d_head=d_head, context_len=context_len,
                 batch_size=batch_size)
    positive_number(bytes_per_value=bytes_per_value)      # 0.5 for INT4 is meaningful
    return 2 * n_layers * batch_size * n_kv_heads * context_len * d_head * bytes_per_value


def quantize_int8(t: torch.Tensor):
    """Symmetric INT8 per row of the last dim: (q int8, scale (..., 1) float) with t ~= q * scale. Chapter 10.

    Each key/value vector gets its own scale, max |t| / 127, so one outlier spoils only its own row."""
    scale = t.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8) / 127.0
    return torch.round(t / scale).clamp(-127, 127).to(torch.int8), scale


class Int8KVCache(KVCache):
    """A KVCache that stores keys and values as INT8 with one float16 scale per vector. Chapter 10.

    Same interface and the same `dtype` as KVCache (of the keys and values it takes and returns); update()
    quantises the new keys/values and returns all of them dequantised to dtype.
    Memory: D bytes + one 2-byte scale per vector instead of 4 D (float32): 3.8x smaller at D = 32.
    """

    storage_dtype = torch.int8

    def __init__(self, n_layers: int, batch_size: int, n_kv_heads: int, context_len: int, d_head: int,
                 dtype=torch.float32, device=None):
        super().__init__(n_layers, batch_size, n_kv_heads, context_len, d_head, dtype=dtype, device=device)
        shape = self.k.shape[:-1] + (1,)
        self.k_scale = torch.zeros(shape, dtype=torch.float16, device=device)
        self.v_scale = torch.zeros(shape, dtype=torch.float16, device=device)

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        (qk, sk), (qv, sv) = quantize_int8(k), quantize_int8(v)
        end = self._store(layer, qk, qv)   # checks shapes and room, stores the int8 values
        self.k_scale[layer, :, :, self.length:end] = sk.to(torch.float16)
        self.v_scale[layer, :, :, self.length:end] = sv.to(torch.float16)
        dq = [(q[layer, :, :, :end].to(self.dtype) * s[layer, :, :, :end].to(self.dtype))
              for q, s in ((self.k, self.k_scale), (self.v, self.v_scale))]
        return dq[0], dq[1]

    @property
    def nbytes(self) -> int:
        """Memory the cache holds: int8 values plus float16 scales, both tensors, all slots."""
        return (self.k.numel() + self.k_scale.numel() * 2) * 2
