"""Chapter 8's from-scratch cells (tagged `scratch`) agree with book.transformer and book.layers."""
import pytest
import torch
from torch.testing import assert_close

from book.transformer import Transformer, TransformerConfig
from nbtools import scratch_namespace

B, H, T, S, D = 2, 3, 5, 7, 8   # all distinct, T > 1
C, V_SRC, V_TGT = H * D, 11, 13


@pytest.fixture(scope="module")
def ns():
    return scratch_namespace("08_encoder_decoder.ipynb")


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = Transformer(TransformerConfig(V_SRC, V_TGT, context_len=16, d_model=C, n_heads=H, n_layers=2, d_ff=20)).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():   # non-trivial norms, so a swapped norm is caught
            if "ln" in name:
                p.uniform_(0.5, 1.5) if name.endswith("weight") else p.uniform_(-0.5, 0.5)
    return m


def _batch():
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, V_SRC, (B, S), generator=g)
    src[1, 4:] = 0
    return src, torch.randint(1, V_TGT, (B, T), generator=g)


def test_scratch_transformer_equals_package(ns, model):
    src, tgt = _batch()
    ours = ns["scratch_transformer"](model, src, tgt)
    assert ours.shape == (B, T, V_TGT)
    assert_close(ours, model(src, tgt), atol=1e-5, rtol=1e-5)


def test_scratch_decoder_layer_and_weights(ns, model):
    src, _ = _batch()
    keep = src != 0
    y, memory = torch.randn(B, T, C), model.encode(src)
    layer = model.decoder[0]
    ours, w = ns["decoder_layer"](y, memory, layer, keep, H)
    theirs, w_book = layer(y, memory, keep, need_weights=True)
    assert w.shape == (B, H, T, S)
    assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    assert_close(w, w_book)


def test_scratch_sinusoid_equals_package(ns, model):
    assert_close(ns["sinusoid"](T, C), model.pos(T, 0).float())
