"""Tests for book.blocks: TransformerBlock and DecoderBlock equal PyTorch's layers (copied with
to_torch_encoder_layer / to_torch_decoder_layer), flags, masks, the KV cache, argument errors."""
import pytest
import torch
import torch.nn as nn
from torch.testing import assert_close

from book.attention import causal_mask
from book.blocks import DecoderBlock, TransformerBlock, to_torch_encoder_layer
from book.chapters.ch08 import to_torch_decoder_layer
from book.chapters.ch06 import block_params
from book.kv_cache import KVCache

B, T, C, H = 2, 5, 12, 3  # all distinct, T > 1


@pytest.mark.parametrize("norm", ["pre", "post"])
@pytest.mark.parametrize("causal", [False, True])
def test_block_matches_torch_encoder_layer(norm, causal):
    torch.manual_seed(4)
    ours = TransformerBlock(C, H, norm=norm, causal=causal, activation="relu")
    with torch.no_grad():
        for ln in (ours.ln1, ours.ln2):                     # non-trivial norms, so a swapped norm is caught
            ln.weight.normal_()
            ln.bias.normal_()
    ref = to_torch_encoder_layer(ours).eval()
    assert isinstance(ref, nn.TransformerEncoderLayer) and (ref.linear1.bias == 0).all()   # ours has no biases
    x = torch.randn(B, T, C)
    mask = ~causal_mask(T) if causal else None              # PyTorch: True = blocked
    assert_close(ours(x), ref(x, src_mask=mask, is_causal=causal))
    out, w = ours(x, need_weights=True)
    assert_close(out, ours(x))
    assert w.shape == (B, H, T, T) and ((w.triu(1) == 0).all() if causal else (w > 0).all())


def test_block_flags_and_mask():
    torch.manual_seed(5)
    x = torch.randn(B, T, C)
    bare = TransformerBlock(C, H, causal=True, residual=False, use_ffn=False, use_norm=False)
    assert bare.ffn is None and isinstance(bare.ln1, nn.Identity)
    assert_close(bare(x), bare.attn(x, causal=True))
    res = TransformerBlock(C, H, causal=True, use_ffn=False, use_norm=False)
    assert_close(res(x), x + res.attn(x, causal=True))
    post = TransformerBlock(C, H, causal=True, norm="post", residual=False)
    h = post.ln1(post.attn(x, causal=True))
    assert_close(post(x), post.ln2(post.ffn(h)))
    with pytest.raises(ValueError, match="only such a block"):
        to_torch_encoder_layer(post)
    # a padding mask on top of the causal one: blocked keys change nothing for earlier queries
    blk = TransformerBlock(C, H, causal=True).eval()
    keep = torch.ones(B, 1, 1, T, dtype=torch.bool)
    keep[:, ..., -1] = False
    assert_close(blk(x, mask=keep)[:, :-1], blk(x)[:, :-1])
    enc = TransformerBlock(C, H, causal=False)
    assert enc(x, mask=keep).shape == (B, T, C)


def test_block_params_is_12_d_squared():
    for d_model, n_heads in ((12, 3), (64, 4)):
        blk = TransformerBlock(d_model, n_heads, causal=True)
        weights = sum(p.numel() for n, p in blk.named_parameters() if not n.startswith("ln"))
        assert weights == block_params(d_model) == 12 * d_model**2
    assert block_params(8, 10) == 4 * 64 + 2 * 8 * 10


def test_block_errors():
    with pytest.raises(ValueError, match="norm must be one of"):
        TransformerBlock(8, 2, causal=True, norm="middle")
    with pytest.raises(ValueError, match="divisible by n_heads"):
        TransformerBlock(8, 3, causal=True)
    with pytest.raises(ValueError, match=r"x should have shape \(B, T, 8\)"):
        TransformerBlock(8, 2, causal=True)(torch.randn(4, 8))
    with pytest.raises(TypeError, match="causal"):   # the caller always says which
        TransformerBlock(8, 2)
    with pytest.raises(TypeError, match="causal must be True"):
        TransformerBlock(8, 2, causal=1)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_decoder_block_equals_torch_decoder_layer(norm):
    torch.manual_seed(0)
    B, T, S, C, H = 2, 5, 7, 16, 4
    ours = DecoderBlock(C, H, 32, norm=norm).eval()
    with torch.no_grad():
        for ln in (ours.ln1, ours.ln2, ours.ln3):          # non-trivial norms, so a swapped norm is caught
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.5, 0.5)
    theirs = to_torch_decoder_layer(ours).eval()
    x, memory = torch.randn(B, T, C), torch.randn(B, S, C)
    keep = torch.ones(B, S, dtype=torch.bool)
    keep[1, 5:] = False                                     # the second source sentence has 2 padding tokens
    want = theirs(x, memory, tgt_mask=~causal_mask(T), tgt_is_causal=True, memory_key_padding_mask=~keep)
    got, weights = ours(x, memory, memory_keep=keep, need_weights=True)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert weights.shape == (B, H, T, S)                    # queries from the decoder, keys from the encoder
    assert torch.all(weights[1, :, :, 5:] == 0) and torch.allclose(weights.sum(-1), torch.ones(B, H, T))


def test_decoder_block_with_kv_cache_equals_full_pass():
    torch.manual_seed(1)
    B, T, S, C, H = 2, 6, 4, 16, 4
    block = DecoderBlock(C, H, norm="pre").eval()
    x, memory = torch.randn(B, T, C), torch.randn(B, S, C)
    full, w_full = block(x, memory, need_weights=True)
    cache = KVCache(1, B, H, T, C // H)
    steps, maps = [], []
    for t in range(T):                                      # one target token at a time, memory reused
        out, w = block(x[:, t:t + 1], memory, cache=cache, layer=0, need_weights=True)
        steps.append(out)
        maps.append(w)                                      # cross-attention weights with a cache: (B, H, 1, S)
        cache.advance(1)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.cat(maps, 2), w_full, atol=1e-5, rtol=1e-5)


def test_decoder_block_rejects_bad_memory():
    block = DecoderBlock(8, 2)
    with pytest.raises(ValueError, match=r"memory should have shape \(2, S, 8\)"):
        block(torch.randn(2, 3, 8), torch.randn(3, 4, 8))
    with pytest.raises(ValueError, match=r"memory_keep \(B, S\) should have shape \(2, 4\)"):
        block(torch.randn(2, 3, 8), torch.randn(2, 4, 8), memory_keep=torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="norm must be one of"):
        DecoderBlock(8, 2, norm="middle")
