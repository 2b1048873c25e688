"""Tests for book.kv_cache: KVCache and Int8KVCache (shapes, room, dtype, memory) and the byte arithmetic."""
import pytest
import torch
from torch.testing import assert_close

from book.chapters.ch07 import check_kv_cache_bytes
from book.kv_cache import Int8KVCache, KVCache, kv_cache_bytes, quantize_int8

B, H = 2, 3

def test_kv_cache_bytes_and_check():
    # Llama-2-7B-like: 32 layers, 32 kv heads, d_head 128, 4096 tokens, fp16 -> 2 GiB
    assert kv_cache_bytes(32, 32, 128, 4096) == 2 * 1024**3
    assert check_kv_cache_bytes(kv_cache_bytes)
    with pytest.raises(AssertionError, match="K and V"):
        check_kv_cache_bytes(lambda L, G, D, T, b, n: L * b * G * T * D * n)



def test_kv_cache_update_and_overflow():
    cache = KVCache(n_layers=2, batch_size=B, n_kv_heads=H, context_len=4, d_head=3)
    assert cache.nbytes == 2 * 2 * B * H * 4 * 3 * 4
    k = torch.randn(B, H, 3, 3)
    k_all, v_all = cache.update(0, k, k + 1)
    assert k_all.shape == (B, H, 3, 3)
    assert_close(v_all, k + 1)
    cache.advance(3)
    k_all, _ = cache.update(0, k[:, :, :1], k[:, :, :1])
    assert k_all.shape == (B, H, 4, 3)
    cache.advance(1)
    with pytest.raises(ValueError, match="KV cache is full"):
        cache.update(0, k[:, :, :1], k[:, :, :1])



def test_dtype_means_the_same_in_both_caches():
    """dtype is the dtype of the keys and values a cache takes and returns; the INT8 cache stores int8 anyway."""
    k = torch.randn(B, H, 3, 4, dtype=torch.float64)
    for kind in (KVCache, Int8KVCache):
        cache = kind(1, B, H, 4, 4, dtype=torch.float64)
        assert cache.dtype == torch.float64
        k_all, v_all = cache.update(0, k, -k)
        assert k_all.dtype == v_all.dtype == torch.float64
        assert_close(k_all, k, atol=0.03, rtol=0.03)
    assert KVCache(1, B, H, 4, 4, dtype=torch.float16).k.dtype == torch.float16
    assert Int8KVCache(1, B, H, 4, 4, dtype=torch.float16).k.dtype == torch.int8


def test_int8_cache_memory_and_round_trip():
    cache = Int8KVCache(1, B, H, 8, 16)
    assert KVCache(1, B, H, 8, 16).nbytes / cache.nbytes == pytest.approx(4 * 16 / (16 + 2))
    k = torch.randn(B, H, 5, 16)
    k_all, _ = cache.update(0, k, k)
    q, s = quantize_int8(k)
    assert_close(k_all, q.float() * s.half().float())
    with pytest.raises(ValueError, match="KV cache is full"):
        cache.advance(5)
        cache.update(0, k, k)
