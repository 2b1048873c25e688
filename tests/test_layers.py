"""Tests for book.layers (FFN, LayerNorm, RMSNorm: agreement with PyTorch, flags, argument errors) and the
chapter 6 exercise checkers of book.chapters.ch06."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from book.chapters.ch06 import check_multi_head, check_rms_norm
from book.layers import FeedForward, LayerNorm, RMSNorm

B, T, C, H = 2, 5, 12, 3  # all distinct, T > 1


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feedforward(activation):
    torch.manual_seed(3)
    ffn = FeedForward(C, activation=activation, bias=True)
    assert ffn.d_ff == 4 * C
    x = torch.randn(B, T, C)
    act = F.relu if activation == "relu" else F.gelu
    want = F.linear(act(F.linear(x, ffn.up.weight, ffn.up.bias)), ffn.down.weight, ffn.down.bias)
    assert_close(ffn(x), want)
    # position-wise: each position alone gives the same answer
    assert_close(ffn(x[:, 2:3]), ffn(x)[:, 2:3])
    assert FeedForward(C, 7).up.weight.shape == (7, C)


def test_feedforward_errors():
    with pytest.raises(ValueError, match="activation must be one of"):
        FeedForward(8, activation="tanh")
    with pytest.raises(ValueError, match="d_ff must be a positive int"):
        FeedForward(8, 0)
    with pytest.raises(ValueError, match=r"x should have shape \(\.\.\., 8\)"):
        FeedForward(8)(torch.randn(2, 3))


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 4), st.integers(1, 16), st.floats(0.01, 100.0), st.booleans())
def test_layer_norm_matches_torch(t, d, scale, bias):
    x = torch.randn(2, t, d) * scale + 3.0
    ours, ref = LayerNorm(d, bias=bias), nn.LayerNorm(d, bias=bias)
    with torch.no_grad():
        ours.weight.normal_()
        ref.weight.copy_(ours.weight)
        if bias:
            ours.bias.normal_()
            ref.bias.copy_(ours.bias)
    assert_close(ours(x), ref(x), atol=1e-4, rtol=1e-4)


def test_layer_norm_errors():
    with pytest.raises(ValueError, match="d_model must be a positive int"):
        LayerNorm(0)
    with pytest.raises(ValueError, match="eps must be a number > 0"):
        LayerNorm(4, eps=0.0)
    with pytest.raises(ValueError, match=r"x should have shape \(\.\.\., 4\)"):
        LayerNorm(4)(torch.randn(3, 5))


def test_rms_norm_matches_torch():
    torch.manual_seed(6)
    x = torch.randn(B, T, C) * 4 + 2
    ours, ref = RMSNorm(C), nn.RMSNorm(C, eps=1e-6)
    with torch.no_grad():
        ours.weight.normal_()
        ref.weight.copy_(ours.weight)
    assert_close(ours(x), ref(x))
    with pytest.raises(ValueError, match="d_model must be a positive int"):
        RMSNorm(0)
    with pytest.raises(ValueError, match=r"x should have shape \(\.\.\., 12\)"):
        ours(torch.randn(3, 4))


def _heads_loop(x, mha, scale_dim=None):
    """Reference solution of the exercise: one head at a time, then concatenate."""
    D = mha.d_head
    scale = (scale_dim or D) ** 0.5
    outs = []
    for h in range(mha.n_heads):
        rows = slice(h * D, (h + 1) * D)
        q = x @ mha.q_proj.weight[rows].T
        k = x @ mha.k_proj.weight[rows].T
        v = x @ mha.v_proj.weight[rows].T
        w = (q @ k.transpose(-2, -1) / scale).softmax(-1)
        outs.append(w @ v)
    return torch.cat(outs, -1) @ mha.out_proj.weight.T


def test_check_multi_head(capsys):
    assert check_multi_head(_heads_loop)
    assert "Correct" in capsys.readouterr().out

    def wrong_scale(x, mha):
        return _heads_loop(x, mha, scale_dim=mha.d_model)

    with pytest.raises(AssertionError, match="sqrt"):
        check_multi_head(wrong_scale)
    with pytest.raises(AssertionError, match="shape"):
        check_multi_head(lambda x, mha: x[:, :, :4])


def test_check_rms_norm(capsys):
    def good(x, w, eps):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def with_mean(x, w, eps):
        return F.layer_norm(x, x.shape[-1:], w, None, eps)

    assert check_rms_norm(good)
    assert "Correct" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="do not subtract the mean"):
        check_rms_norm(with_mean)
    with pytest.raises(AssertionError, match="divide by sqrt"):
        check_rms_norm(lambda x, w, eps: x * w)
    with pytest.raises(AssertionError, match="shape"):
        check_rms_norm(lambda x, w, eps: x.mean(-1))
