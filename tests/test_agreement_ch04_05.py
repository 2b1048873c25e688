"""The from-scratch cells of chapters 4 and 5 agree with the `book` package they bridge to.

Loads each notebook's cells tagged `scratch`, runs them in a fresh namespace, and compares on random
inputs whose dimensions all differ (B=2, H=3, T=5, D=8; Tk=7 for cross shapes), so a swapped axis,
a missing scale or an off-by-one position cannot hide.
"""
import pytest
import torch
import torch.nn.functional as F

from nbtools import scratch_namespace

from book.attention import attention, causal_mask, scaled_dot_product_attention
from book.positional import RotaryEmbedding, SinusoidalPositionalEncoding, sinusoidal_table

B, H, T, TK, D, DV = 2, 3, 5, 7, 8, 4


@pytest.fixture(scope="module")
def ch4():
    return scratch_namespace("04_self_attention.ipynb")


@pytest.fixture(scope="module")
def ch5():
    return scratch_namespace("05_positional_encoding.ipynb")


def _qkv(tq=T, tk=TK, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, tq, D, generator=g), torch.randn(B, H, tk, D, generator=g),
            torch.randn(B, H, tk, DV, generator=g))


def test_ch4_scratch_attention_matches_package(ch4):
    q, k, v = _qkv()
    out, w = ch4["attention_scratch"](q, k, v)
    pkg_out, pkg_w = scaled_dot_product_attention(q, k, v)
    assert out.shape == (B, H, T, DV) and w.shape == (B, H, T, TK)
    torch.testing.assert_close(out, pkg_out)
    torch.testing.assert_close(w, pkg_w)
    torch.testing.assert_close(out, attention(q, k, v))


def test_ch4_scratch_causal_mask_matches_package(ch4):
    for n in (1, 2, T, TK):
        assert torch.equal(ch4["causal_mask_scratch"](n), causal_mask(n))
    q, k, v = _qkv(tq=TK)
    out, w = ch4["attention_scratch"](q, k, v, ch4["causal_mask_scratch"](TK))
    torch.testing.assert_close(out, attention(q, k, v, is_causal=True))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert (w[..., ~causal_mask(TK)] == 0).all()


def test_ch4_scratch_with_a_general_mask(ch4):
    q, k, v = _qkv(seed=3)
    mask = torch.rand(T, TK, generator=torch.Generator().manual_seed(3)) > 0.5
    mask[:, 0] = True
    torch.testing.assert_close(ch4["attention_scratch"](q, k, v, mask)[0],
                               scaled_dot_product_attention(q, k, v, mask)[0])


def test_ch5_scratch_sinusoidal_matches_package(ch5):
    for d_model in (D, 12, 32):
        ours = ch5["sinusoidal_scratch"](T + 60, d_model)
        assert ours.shape == (T + 60, d_model)
        torch.testing.assert_close(ours.float(), sinusoidal_table(T + 60, d_model), atol=1e-5, rtol=0)
        torch.testing.assert_close(ours.float(), SinusoidalPositionalEncoding(d_model, context_len=16)(T + 60),
                                   atol=1e-5, rtol=0)


def test_ch5_scratch_rope_matches_package(ch5):
    x = torch.randn(B, H, T, D, generator=torch.Generator().manual_seed(5))
    rope = RotaryEmbedding(D)
    for offset in (0, 1, 13):
        ours = ch5["rope_scratch"](x, offset)
        assert ours.shape == (B, H, T, D)
        torch.testing.assert_close(ours, rope(x, offset=offset), atol=1e-5, rtol=1e-5)


def test_ch5_scratch_alibi_matches_package(ch5):
    from book.positional import alibi_bias
    for n_heads in (1, 2, 4, 8):                    # powers of two: the scratch cell's formula
        ours = ch5["alibi_scratch"](T, n_heads)
        assert ours.shape == (n_heads, T, T)
        torch.testing.assert_close(ours, alibi_bias(T, n_heads))
