"""Chapter 6's from-scratch cells (tagged `scratch`) agree with book.attention, book.layers and book.blocks."""
import pytest
import torch
from torch.testing import assert_close

from book.attention import causal_mask
from book.attention import Attention
from book.blocks import TransformerBlock
from book.layers import FeedForward, LayerNorm
from nbtools import scratch_namespace

B, H, T, D = 2, 3, 5, 8  # all distinct, T > 1
C = H * D


@pytest.fixture(scope="module")
def ns():
    return scratch_namespace("06_multihead_block.ipynb")


def test_split_and_merge_heads(ns):
    x = torch.randn(B, T, C)
    heads = ns["split_heads"](x, H)
    assert heads.shape == (B, H, T, D)
    assert_close(heads, x.view(B, T, H, D).transpose(1, 2))   # what Attention does to q, k and v
    assert_close(ns["merge_heads"](heads), x)


@pytest.mark.parametrize("masked", [False, True])
def test_multi_head_attention(ns, masked):
    torch.manual_seed(0)
    ours = ns["MultiHeadSelfAttention"](C, H)
    book = Attention(C, H)
    book.load_state_dict(ours.state_dict())
    x = torch.randn(B, T, C)
    mask = causal_mask(T) if masked else None
    out, w = ours(x, mask)
    want, want_w = book(x, causal=False, mask=mask, need_weights=True)
    assert out.shape == (B, T, C) and w.shape == (B, H, T, T)
    assert_close(out, want)
    assert_close(w, want_w)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feed_forward(ns, activation):
    torch.manual_seed(1)
    ours = ns["FeedForwardScratch"](C, activation=activation)
    book = FeedForward(C, activation=activation)
    book.load_state_dict(ours.state_dict())
    x = torch.randn(B, T, C)
    assert_close(ours(x), book(x))
    assert ns["FeedForwardScratch"](C, 7).up.weight.shape == (7, C)


def test_layer_norm(ns):
    torch.manual_seed(2)
    ours = ns["LayerNormScratch"](C)
    with torch.no_grad():
        ours.weight.normal_()
        ours.bias.normal_()
    book = LayerNorm(C)
    book.load_state_dict(ours.state_dict())
    x = torch.randn(B, T, C) * 10 + 3
    assert_close(ours(x), book(x))
    assert_close(ns["layer_norm"](x, ours.weight, ours.bias), book(x))


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_transformer_block(ns, norm):
    torch.manual_seed(3)
    ours = ns["TransformerBlockScratch"](C, H, norm)
    with torch.no_grad():
        for ln in (ours.ln1, ours.ln2):
            ln.weight.normal_()
            ln.bias.normal_()
    book = TransformerBlock(C, H, causal=True, norm=norm, activation="relu")
    book.load_state_dict(ours.state_dict())
    x = torch.randn(B, T, C)
    assert_close(ours(x, causal_mask(T)), book(x))
