"""Tests for book.attention: masks, the teaching attention, the fused fast path, the self-check."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from book.attention import (attention, causal_mask, check_attention, padding_mask,
                            scaled_dot_product_attention)

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


def test_module_dropout_is_active_in_training_and_identity_in_eval():
    from book.layers import MultiHeadAttention

    torch.manual_seed(0)
    C = H * D
    x = torch.randn(B, TQ, C)
    m, plain = MultiHeadAttention(C, H, dropout=0.5), MultiHeadAttention(C, H)
    plain.load_state_dict(m.state_dict())
    m.eval()
    for need_weights in (False, True):  # fused and written-out paths
        out = m(x, is_causal=True, need_weights=need_weights)
        want = plain(x, is_causal=True, need_weights=need_weights)
        assert_close(out[0] if need_weights else out, want[0] if need_weights else want)
    m.train()
    for need_weights in (False, True):
        torch.manual_seed(0)
        a = m(x, is_causal=True, need_weights=need_weights)
        a = a[0] if need_weights else a
        torch.manual_seed(1)
        b = m(x, is_causal=True, need_weights=need_weights)
        b = b[0] if need_weights else b
        assert not torch.allclose(a, b)  # dropout draws differ
        assert not torch.allclose(a, plain(x, is_causal=True))  # and differ from no dropout


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
    from book.attention import peak_cpu_memory

    T = 1024
    q = torch.randn(1, 1, T, 16)
    naive = peak_cpu_memory(lambda: scaled_dot_product_attention(q, q, q))
    fused = peak_cpu_memory(lambda: attention(q, q, q))
    assert naive >= T * T * 4            # at least one float32 (T, T) matrix
    assert fused < T * T * 4 / 2         # well under one (only O(T) buffers)
    assert peak_cpu_memory(lambda: None) == 0
