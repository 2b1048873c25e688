"""Chapter 10's from-scratch cells (tagged `scratch`) agree with PyTorch and with book.layers / book.optim."""
import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from book.layers import FeedForward, RMSNorm
from book.optim import newton_schulz
from nbtools import scratch_namespace

B, T, C, F_HIDDEN = 2, 5, 12, 32   # all distinct, T > 1


@pytest.fixture(scope="module")
def ns():
    return scratch_namespace("10_modern_gpt.ipynb")


def test_scratch_rms_norm_equals_pytorch_and_package(ns):
    torch.manual_seed(0)
    x, w = torch.randn(B, T, C) * 3 + 1, torch.randn(C)
    ours = ns["rms_norm"](x, w)
    assert ours.shape == (B, T, C)
    assert_close(ours, F.rms_norm(x, (C,), w, eps=1e-6))
    package = RMSNorm(C)
    package.weight.data.copy_(w)
    assert_close(package(x), ours)


def test_scratch_swiglu_equals_package_ffn(ns):
    torch.manual_seed(0)
    ours = ns["SwiGLU"](C, F_HIDDEN)
    package = FeedForward(C, F_HIDDEN, activation="swiglu")
    package.up.weight.data.copy_(torch.cat([ours.gate.weight, ours.up.weight]))
    package.down.weight.data.copy_(ours.down.weight)
    x = torch.randn(B, T, C)
    assert_close(package(x), ours(x))
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in package.parameters())


@pytest.mark.parametrize("shape", [(12, 40), (40, 12), (16, 16)])   # wide, tall, square
def test_scratch_orthogonalise_equals_package_newton_schulz(ns, shape):
    torch.manual_seed(0)
    g = torch.randn(*shape)
    assert_close(ns["orthogonalise"](g), newton_schulz(g))
    for steps in (0, 1, 3):
        assert_close(ns["orthogonalise"](g, steps=steps), newton_schulz(g, steps=steps))
    sv = torch.linalg.svdvals(ns["orthogonalise"](g))
    assert sv.min() > 0.5 and sv.max() < 1.3
