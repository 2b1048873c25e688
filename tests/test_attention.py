"""Tests for book.attention: masks, the teaching attention, the fused fast path, the self-check, and the one
attention module (Attention): agreement with nn.MultiheadAttention and F.scaled_dot_product_attention, kv-head
groups, the KV cache, the combined masks, weights in every mode."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from book.attention import (Attention, attention, causal_mask, padding_mask, scaled_dot_product_attention,
                            sliding_window_mask, to_torch_mha)
from book.chapters.ch04 import check_attention
from book.kv_cache import Int8KVCache, KVCache

B, H, TQ, TK, D, DV = 2, 3, 5, 7, 8, 4  # all distinct, T > 1


def qkv(tq=TQ, tk=TK, d=D, dv=DV, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, tq, d, generator=g, dtype=dtype), torch.randn(B, H, tk, d, generator=g, dtype=dtype),
            torch.randn(B, H, tk, dv, generator=g, dtype=dtype))


def test_causal_mask_values_and_device():
    m = causal_mask(3)
    assert m.dtype == torch.bool and m.shape == (3, 3)
    assert m.tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert causal_mask(4, device="cpu").device.type == "cpu"


@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "3"])
def test_causal_mask_rejects_bad_T(bad):
    with pytest.raises(ValueError, match="T must be a positive int"):
        causal_mask(bad)


def test_padding_mask():
    m = padding_mask(torch.tensor([2, 3]), 3)
    assert m.shape == (2, 1, 1, 3)
    assert m[:, 0, 0].tolist() == [[True, True, False], [True, True, True]]
    with pytest.raises(ValueError, match=r"lengths should have shape \(B,\)"):
        padding_mask(torch.tensor([[1]]), 3)
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 3\]"):
        padding_mask(torch.tensor([4]), 3)


def test_matches_pytorch_without_mask():
    q, k, v = qkv()
    out, w = scaled_dot_product_attention(q, k, v)
    assert out.shape == (B, H, TQ, DV) and w.shape == (B, H, TQ, TK)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))
    torch.testing.assert_close(out, attention(q, k, v))


def test_matches_pytorch_causal():
    q, k, v = qkv(tq=TK)
    out, w = scaled_dot_product_attention(q, k, v, causal_mask(TK))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    torch.testing.assert_close(out, attention(q, k, v, is_causal=True))
    torch.testing.assert_close(out, attention(q, k, v, mask=causal_mask(TK)))
    assert (w.masked_select(~causal_mask(TK)) == 0).all()  # exactly 0, not just small


def test_weights_are_softmax_of_scaled_scores():
    q, k, v = qkv(dtype=torch.float64)
    _, w = scaled_dot_product_attention(q, k, v)
    want = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-1)
    torch.testing.assert_close(w, want)


def test_padding_mask_broadcasts_over_heads_and_queries():
    q, k, v = qkv()
    m = padding_mask(torch.tensor([3, 7]), TK)
    out, w = scaled_dot_product_attention(q, k, v, m)
    assert (w[0, ..., 3:] == 0).all()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=m))


@settings(max_examples=30, deadline=None)
@given(tq=st.integers(1, 6), tk=st.integers(1, 6), d=st.integers(1, 9), seed=st.integers(0, 10_000))
def test_rows_sum_to_one_and_masked_weights_zero(tq, tk, d, seed):
    q, k, v = qkv(tq, tk, d, 3, seed)
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(tq, tk, generator=g) > 0.5
    mask[:, 0] = True  # keep one key per row so rows are defined
    out, w = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(w.sum(-1), torch.ones(B, H, tq))
    assert (w[..., ~mask] == 0).all()
    assert (w >= 0).all()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-5, rtol=1e-4)


@settings(max_examples=20, deadline=None)
@given(T=st.integers(2, 8), seed=st.integers(0, 10_000))
def test_permutation_equivariance_without_positions(T, seed):
    """Shuffle the tokens: q, k, v rows shuffle, and the outputs shuffle the same way."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, D, generator=g)
    Wq, Wk, Wv = (torch.randn(D, D, generator=g) for _ in range(3))
    perm = torch.randperm(T, generator=g)

    def self_attn(x):
        return scaled_dot_product_attention(x @ Wq, x @ Wk, x @ Wv)[0]

    torch.testing.assert_close(self_attn(x[:, perm]), self_attn(x)[:, perm], atol=1e-5, rtol=1e-4)


def test_cross_attention_shapes():
    q, k, v = qkv(tq=3, tk=9)
    out, w = scaled_dot_product_attention(q, k, v)
    assert out.shape == (B, H, 3, DV) and w.shape == (B, H, 3, 9)
    assert attention(q, k, v).shape == (B, H, 3, DV)


def test_fully_masked_row_is_an_error_not_nan():
    """PyTorch's math path gives NaN weights for a query with no key left; the book refuses the mask."""
    q, k, v = qkv()
    mask = torch.ones(TQ, TK, dtype=torch.bool)
    mask[0] = False
    scores = (q @ k.transpose(-2, -1)).masked_fill(~mask, float("-inf"))
    assert torch.isnan(scores.softmax(-1)[..., 0, :]).all()  # what the check prevents
    for fn in (scaled_dot_product_attention, attention):
        with pytest.raises(ValueError, match="True = may attend"):
            fn(q, k, v, mask=mask)
    # a padding mask in the opposite convention (True = padding) blocks every key of an unpadded sequence
    with pytest.raises(ValueError, match="blocks every key"):
        scaled_dot_product_attention(q, k, v, ~padding_mask(torch.tensor([3, 7]), TK))


def test_shape_errors():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="q and k must share the last dim D"):
        scaled_dot_product_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match="same number of keys Tk"):
        scaled_dot_product_attention(q, k, v[..., :2, :])
    with pytest.raises(ValueError, match=r"q should have shape \(\.\.\., T, D\)"):
        scaled_dot_product_attention(torch.randn(4), k, v)
    with pytest.raises(TypeError, match="k must be a torch.Tensor"):
        scaled_dot_product_attention(q, [[1.0]], v)
    with pytest.raises(ValueError, match=r"mask should broadcast to \(\.\.\., Tq, Tk\) = \(\.\.\., 5, 7\)"):
        scaled_dot_product_attention(q, k, v, torch.ones(7, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask must be a bool tensor"):
        attention(q, k, v, mask=torch.ones(TQ, TK))
    with pytest.raises(ValueError, match="either mask or is_causal"):
        attention(q, k, v, mask=torch.ones(TQ, TK, dtype=torch.bool), is_causal=True)
    with pytest.raises(ValueError, match=r"dropout_p must lie in \[0, 1\)"):
        attention(q, k, v, dropout_p=1.5)


def test_fast_path_dropout_zeroes_and_rescales_attention_weights():
    """With v = identity, out = (dropped) weights: each weight is either 0 or w / (1 - p)."""
    q, k, _ = qkv()
    eye = torch.eye(TK).expand(B, H, TK, TK)
    _, w = scaled_dot_product_attention(q, k, eye)
    assert_close(attention(q, k, eye), w)  # dropout_p=0: the weights themselves
    p = 0.5
    torch.manual_seed(0)
    dropped = attention(q, k, eye, dropout_p=p)
    zero = dropped == 0
    assert 0.3 < zero.float().mean() < 0.7  # about a fraction p of the weights is dropped
    assert_close(dropped[~zero], w[~zero] / (1 - p))  # the rest are rescaled by 1 / (1 - p)
    torch.manual_seed(1)
    assert not torch.equal(attention(q, k, eye, dropout_p=p), dropped)  # a fresh draw each call


def test_backward_through_teaching_version():
    q, k, v = (t.requires_grad_() for t in qkv(tq=TK))
    out, _ = scaled_dot_product_attention(q, k, v, causal_mask(TK))
    out.sum().backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (q, k, v))


def test_check_attention_accepts_reference_and_rejects_wrong():
    assert check_attention(lambda q, k, v, m: scaled_dot_product_attention(q, k, v, m))
    assert check_attention(lambda q, k, v, m: attention(q, k, v, m))

    def unscaled(q, k, v, m):
        s = q @ k.transpose(-2, -1)
        if m is not None:
            s = s.masked_fill(~m, float("-inf"))
        return s.softmax(-1) @ v

    with pytest.raises(AssertionError, match="without a mask"):
        check_attention(unscaled)

    def ignores_mask(q, k, v, m):
        return scaled_dot_product_attention(q, k, v)

    with pytest.raises(AssertionError, match="with the mask"):
        check_attention(ignores_mask)
    with pytest.raises(AssertionError, match="should have shape"):
        check_attention(lambda q, k, v, m: v)


def test_peak_cpu_memory_sees_the_quadratic_matrix_and_the_fused_kernel_avoids_it():
    from book.chapters.ch04 import peak_cpu_memory

    T = 1024
    q = torch.randn(1, 1, T, 16)
    naive = peak_cpu_memory(lambda: scaled_dot_product_attention(q, q, q))
    fused = peak_cpu_memory(lambda: attention(q, q, q))
    assert naive >= T * T * 4            # at least one float32 (T, T) matrix
    assert fused < T * T * 4 / 2         # well under one (only O(T) buffers)
    assert peak_cpu_memory(lambda: None) == 0


# ---- the module: Attention ---------------------------------------------------------------------------------
C = H * D   # 24


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_torch_mha(bias, causal):
    torch.manual_seed(0)
    m = Attention(C, H, bias=bias)
    ref = to_torch_mha(m)
    x = torch.randn(B, TQ, C)
    blocked = ~causal_mask(TQ) if causal else None  # torch: True = blocked
    want, want_w = ref(x, x, x, attn_mask=blocked, average_attn_weights=False)
    out, w = m(x, causal=causal, need_weights=True)
    assert out.shape == (B, TQ, C) and w.shape == (B, H, TQ, TQ)
    assert_close(out, want)
    assert_close(w, want_w)
    assert_close(m(x, causal=causal), want)  # fast path
    assert_close(m(x, causal=False, mask=causal_mask(TQ) if causal else None), want)  # explicit mask == causal


def test_attention_cross_attention_matches_torch_mha_with_weights():
    torch.manual_seed(1)
    m = Attention(C, H, bias=True)
    ref = to_torch_mha(m)
    x, ctx = torch.randn(B, TQ, C), torch.randn(B, TK, C)
    keep = torch.rand(B, 1, 1, TK) > 0.3
    keep[..., 0] = True
    out, w = m(x, ctx, causal=False, mask=keep, need_weights=True)
    assert out.shape == (B, TQ, C) and w.shape == (B, H, TQ, TK)
    want, want_w = ref(x, ctx, ctx, key_padding_mask=~keep[:, 0, 0], average_attn_weights=False)
    assert_close(out, want)
    assert_close(w, want_w)
    assert_close(m(x, ctx, causal=False, mask=keep), want)
    assert (w[~keep.expand_as(w)] == 0).all()


def _heads(m, x, ctx=None):
    """q, k, v of every head, (B, H, T, D), with the kv heads repeated to H: the module's inputs to SDPA."""
    src = x if ctx is None else ctx
    q = m.q_proj(x).unflatten(-1, (m.n_heads, m.d_head)).transpose(1, 2)
    k, v = (p(src).unflatten(-1, (m.n_kv_heads, m.d_head)).transpose(1, 2).repeat_interleave(
        m.n_heads // m.n_kv_heads, 1) for p in (m.k_proj, m.v_proj))
    return q, k, v


@pytest.mark.parametrize("n_kv_heads", [1, 3])
def test_attention_is_projections_around_torch_sdpa(n_kv_heads):
    """Every head's output is F.scaled_dot_product_attention of its q, k, v; G < H shares each kv head."""
    torch.manual_seed(2)
    m = Attention(6 * 4, 6, n_kv_heads).eval()
    assert m.k_proj.weight.shape == m.v_proj.weight.shape == (n_kv_heads * 4, 24)   # (G * D, C) from the start
    x = torch.randn(B, TQ, 24)
    q, k, v = _heads(m, x)
    heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)   # (B, H, T, D)
    assert_close(m(x, causal=True), m.out_proj(heads.transpose(1, 2).flatten(-2)))
    out, w = m(x, causal=True, need_weights=True)
    assert w.shape == (B, 6, TQ, TQ)
    assert_close(out, m(x, causal=True))


def test_attention_with_all_kv_heads_equals_grouped_attention_with_repeated_weights():
    torch.manual_seed(3)
    d_model, n_heads, n_kv = 16, 4, 2
    gqa, mha = Attention(d_model, n_heads, n_kv), Attention(d_model, n_heads)
    Dh = d_model // n_heads
    with torch.no_grad():
        mha.q_proj.weight.copy_(gqa.q_proj.weight)
        mha.out_proj.weight.copy_(gqa.out_proj.weight)
        for name in ("k_proj", "v_proj"):
            w = getattr(gqa, name).weight.view(n_kv, Dh, d_model).repeat_interleave(n_heads // n_kv, 0)
            getattr(mha, name).weight.copy_(w.reshape(d_model, d_model))
    x = torch.randn(B, TQ, d_model)
    for causal in (False, True):
        assert_close(gqa(x, causal=causal), mha(x, causal=causal))


def test_causal_is_a_required_keyword():
    """The old module's docstring said causal while its default was bidirectional: now the caller says which."""
    m = Attention(C, H)
    x = torch.randn(B, TQ, C)
    with pytest.raises(TypeError, match="causal"):
        m(x)
    with pytest.raises(TypeError, match="causal must be True"):
        m(x, causal=None)
    _, w = m(x, causal=True, need_weights=True)
    assert (w.triu(1) == 0).all() and (w[:, :, 0, 0] == 1).all()   # position 0 sees itself only
    _, w = m(x, causal=False, need_weights=True)
    assert (w[:, :, 0, 1:] > 0).all()                                # bidirectional: it sees the last token


def test_window_and_a_callers_mask_are_combined_not_dropped():
    """With a window, a caller's mask was silently discarded; now causal, window and mask are ANDed."""
    torch.manual_seed(4)
    m = Attention(C, H, window=3).eval()
    x = torch.randn(B, TQ, C)
    keep = torch.ones(B, 1, 1, TQ, dtype=torch.bool)
    keep[1, ..., 3] = False                                          # batch item 1: key 3 is padding
    out, w = m(x, causal=True, mask=keep, need_weights=True)
    want = causal_mask(TQ) & sliding_window_mask(TQ, window=3) & keep
    assert torch.equal(w > 0, want.expand(B, H, TQ, TQ))
    assert not torch.allclose(out, m(x, causal=True))               # the mask changes the output
    assert_close(m(x, causal=True, mask=keep), out)                  # fast path: the same combination
    q, k, v = _heads(m, x)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=want)
    assert_close(out, m.out_proj(ref.transpose(1, 2).flatten(-2)))
    with pytest.raises(ValueError, match="causal=True"):
        m(x, causal=False)


@pytest.mark.parametrize("n_kv_heads, window, int8", [(None, None, False), (1, None, False), (3, 2, False),
                                                      (None, None, True)])
def test_attention_with_a_cache_equals_the_full_pass_and_returns_weights(n_kv_heads, window, int8):
    torch.manual_seed(5)
    m = Attention(C, H, n_kv_heads, rope=True, qk_norm=True, window=window).eval()
    T = 7
    x = torch.randn(B, T, C)
    full, w_full = m(x, causal=True, need_weights=True)
    cache = (Int8KVCache if int8 else KVCache)(1, B, m.n_kv_heads, T, m.d_head)
    outs, maps = [], []
    for a, b in ((0, 3), (3, 5), (5, 6), (6, 7)):                     # a prompt, a chunk, then single tokens
        out, w = m(x[:, a:b], causal=True, cache=cache, need_weights=True)
        assert w.shape == (B, H, b - a, b)                             # weights over every key so far
        assert_close(out, m(x[:, a:b] if a == 0 else x[:, a:b], causal=True, cache=_copy(cache, m, x[:, :a])))
        cache.advance(b - a)
        outs.append(out)
        maps.append(F.pad(w, (0, T - b)))
    tol = dict(atol=0.05, rtol=0.05) if int8 else dict(atol=1e-5, rtol=1e-5)
    assert_close(torch.cat(outs, 1), full, **tol)
    assert_close(torch.cat(maps, 2), w_full, **tol)


def _copy(cache, m, prefix):
    """A fresh cache of the same kind holding the keys of `prefix` (for the fast path of the same step)."""
    fresh = type(cache)(1, B, m.n_kv_heads, cache.context_len, m.d_head)
    if prefix.shape[1]:
        m(prefix, causal=True, cache=fresh)
        fresh.advance(prefix.shape[1])
    return fresh


def test_attention_mask_with_a_cache_is_combined_with_the_offset_causal_mask():
    torch.manual_seed(6)
    m = Attention(C, H).eval()
    x = torch.randn(B, 6, C)
    keep = torch.ones(B, 1, 1, 6, dtype=torch.bool)
    keep[0, ..., 1] = False                                          # batch item 0: key 1 is padding
    full = m(x, causal=True, mask=keep)
    cache = KVCache(1, B, H, 6, D)
    m(x[:, :4], causal=True, mask=keep[..., :4], cache=cache)
    cache.advance(4)
    out, w = m(x[:, 4:], causal=True, mask=keep, cache=cache, need_weights=True)
    assert_close(out, full[:, 4:], atol=1e-5, rtol=1e-5)
    assert (w[0, :, :, 1] == 0).all() and (w[:, :, 0, 5] == 0).all()   # padding, and the future


def test_attention_dropout_is_active_in_training_and_identity_in_eval():
    torch.manual_seed(0)
    x = torch.randn(B, TQ, C)
    m, plain = Attention(C, H, dropout=0.5), Attention(C, H)
    plain.load_state_dict(m.state_dict())
    m.eval()
    for need_weights in (False, True):  # fused and written-out paths
        out = m(x, causal=True, need_weights=need_weights)
        want = plain(x, causal=True, need_weights=need_weights)
        assert_close(out[0] if need_weights else out, want[0] if need_weights else want)
    m.train()
    for need_weights in (False, True):
        torch.manual_seed(0)
        a = m(x, causal=True, need_weights=need_weights)
        a = a[0] if need_weights else a
        torch.manual_seed(1)
        b = m(x, causal=True, need_weights=need_weights)
        b = b[0] if need_weights else b
        assert not torch.allclose(a, b)  # dropout draws differ
        assert not torch.allclose(a, plain(x, causal=True))  # and differ from no dropout


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 3), st.integers(1, 6), st.sampled_from([(8, 1), (8, 2), (12, 4), (16, 8)]))
def test_attention_weights_are_distributions(b, t, dims):
    d_model, n_heads = dims
    m = Attention(d_model, n_heads)
    out, w = m(torch.randn(b, t, d_model), causal=True, need_weights=True)
    assert out.shape == (b, t, d_model)
    assert_close(w.sum(-1), torch.ones(b, n_heads, t, t)[..., 0])
    assert (w.triu(1) == 0).all()  # causal: nothing above the diagonal


def test_attention_errors():
    with pytest.raises(ValueError, match="divisible by n_heads"):
        Attention(10, 3)
    with pytest.raises(ValueError, match="n_heads must be a positive int"):
        Attention(8, 0)
    with pytest.raises(ValueError, match="dropout must lie"):
        Attention(8, 2, dropout=1.0)
    with pytest.raises(ValueError, match="n_heads must be divisible by n_kv_heads"):
        Attention(12, 3, 2)
    with pytest.raises(ValueError, match="window must be a positive int or None"):
        Attention(12, 3, window=0)
    m = Attention(C, H)
    x = torch.randn(B, TQ, C)
    with pytest.raises(ValueError, match=r"x should have shape \(B, T, 24\)"):
        m(torch.randn(B, TQ, 8), causal=False)
    with pytest.raises(ValueError, match="context should have shape"):
        m(x, torch.randn(3, 4, C), causal=False)
    with pytest.raises(ValueError, match="cross-attention .* takes no causal=True"):
        m(x, torch.randn(B, TK, C), causal=True)
    with pytest.raises(ValueError, match="takes no rope"):
        Attention(C, H, rope=True)(x, torch.randn(B, TK, C), causal=False)
    with pytest.raises(ValueError, match="KV cache serves causal"):
        m(x, causal=False, cache=KVCache(1, B, H, 8, D))
    with pytest.raises(ValueError, match=r"= \(\.\.\., 5, 7\)"):   # a mask must cover cached keys too
        cache = KVCache(1, B, H, 8, D)
        cache.length = 2
        m(x, causal=True, cache=cache, mask=torch.ones(TQ, TQ, dtype=torch.bool))


def test_to_torch_mha_refuses_what_pytorch_lacks():
    for m in (Attention(C, H, 1), Attention(C, H, rope=True), Attention(C, H, qk_norm=True),
              Attention(C, H, window=2)):
        with pytest.raises(ValueError, match="only plain multi-head"):
            to_torch_mha(m)
    ref = to_torch_mha(Attention(C, H), bias=True)
    assert isinstance(ref, nn.MultiheadAttention) and (ref.in_proj_bias == 0).all()


def test_only_a_callers_mask_is_checked_for_empty_rows(monkeypatch):
    """The empty-row check costs a device sync; the module's own causal and window masks never need it."""
    import book.attention as A
    calls = []
    monkeypatch.setattr(A, "_check_mask", lambda keep, tq, tk: calls.append((tq, tk)))
    m = Attention(C, H, window=2).eval()
    x = torch.randn(B, TQ, C)
    cache = KVCache(1, B, H, 8, D)
    m(x[:, :3], causal=True, cache=cache)
    cache.advance(3)
    m(x[:, 3:], causal=True, cache=cache, need_weights=True)
    assert calls == []
    m(x, causal=True, mask=torch.ones(B, 1, 1, TQ, dtype=torch.bool))
    assert calls == [(TQ, TQ)]


def test_one_layer_attention_keys_look_one_token_back_and_unscaled_drops_only_the_sqrt_d():
    from book.attention import OneLayerAttention
    x = torch.randint(0, 7, (2, 6), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(1)
    scaled = OneLayerAttention(7, d=16)
    torch.manual_seed(1)
    raw = OneLayerAttention(7, d=16, scaled=False)           # the same weights, no 1/sqrt(d)
    out = scaled(x)
    assert out.shape == (2, 6, 7) and scaled.weights.shape == (2, 6, 6)
    assert (scaled.weights[:, ~causal_mask(6)] == 0).all()
    with torch.no_grad():
        shift = lambda t: F.pad(t, (0, 0, 1, 0))[:, :-1]
        h = scaled.embed(x) + shift(scaled.left_embed(x))
        scores = scaled.q_proj(h) @ scaled.k_proj(shift(h)).transpose(1, 2)   # the key at j is made from h[j-1]
        want = scores.masked_fill(~causal_mask(6), float("-inf"))
        raw(x)
    torch.testing.assert_close(scaled.weights, (want / 4).softmax(-1))
    torch.testing.assert_close(raw.weights, want.softmax(-1))
    with pytest.raises(ValueError, match="d"):
        OneLayerAttention(7, d=0)
