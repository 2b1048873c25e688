"""Tests for book.layers: agreement with PyTorch, shapes, masks, flags and argument errors."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from book.attention import causal_mask
from book.layers import (
    FeedForward,
    LayerNorm,
    MultiHeadAttention,
    TransformerBlock,
    RMSNorm,
    block_params,
    check_multi_head,
    check_rms_norm,
)

B, T, C, H = 2, 5, 12, 3  # all distinct, T > 1


def _torch_mha(m: MultiHeadAttention) -> nn.MultiheadAttention:
    """An nn.MultiheadAttention holding the same weights as our module."""
    bias = m.q_proj.bias is not None
    ref = nn.MultiheadAttention(m.d_model, m.n_heads, bias=bias, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([m.q_proj.weight, m.k_proj.weight, m.v_proj.weight]))
        ref.out_proj.weight.copy_(m.out_proj.weight)
        if bias:
            ref.in_proj_bias.copy_(torch.cat([m.q_proj.bias, m.k_proj.bias, m.v_proj.bias]))
            ref.out_proj.bias.copy_(m.out_proj.bias)
    return ref


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_mha_matches_torch(bias, causal):
    torch.manual_seed(0)
    m = MultiHeadAttention(C, H, bias=bias)
    ref = _torch_mha(m)
    x = torch.randn(B, T, C)
    blocked = ~causal_mask(T) if causal else None  # torch: True = blocked
    want, want_w = ref(x, x, x, attn_mask=blocked, average_attn_weights=False)
    out, w = m(x, is_causal=causal, need_weights=True)
    assert out.shape == (B, T, C) and w.shape == (B, H, T, T)
    assert_close(out, want)
    assert_close(w, want_w)
    assert_close(m(x, is_causal=causal), want)  # fast path
    mask = causal_mask(T) if causal else None
    assert_close(m(x, mask=mask), want)  # explicit mask == is_causal


def test_mha_cross_attention_matches_torch():
    torch.manual_seed(1)
    m = MultiHeadAttention(C, H, bias=True)
    ref = _torch_mha(m)
    x, ctx = torch.randn(B, T, C), torch.randn(B, 7, C)
    keep = torch.rand(B, 1, 1, 7) > 0.3
    keep[..., 0] = True
    out, w = m(x, context=ctx, mask=keep, need_weights=True)
    assert out.shape == (B, T, C) and w.shape == (B, H, T, 7)
    want, want_w = ref(x, ctx, ctx, key_padding_mask=~keep[:, 0, 0], average_attn_weights=False)
    assert_close(out, want)
    assert_close(w, want_w)
    assert_close(m(x, context=ctx, mask=keep), want)
    assert (w[~keep.expand_as(w)] == 0).all()


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 3), st.integers(1, 6), st.sampled_from([(8, 1), (8, 2), (12, 4), (16, 8)]))
def test_mha_weights_are_distributions(b, t, dims):
    d_model, n_heads = dims
    m = MultiHeadAttention(d_model, n_heads)
    out, w = m(torch.randn(b, t, d_model), is_causal=True, need_weights=True)
    assert out.shape == (b, t, d_model)
    assert_close(w.sum(-1), torch.ones(b, n_heads, t, t)[..., 0])
    assert (w.triu(1) == 0).all()  # causal: nothing above the diagonal


def test_mha_dropout_only_in_training():
    torch.manual_seed(2)
    m = MultiHeadAttention(C, H, dropout=0.5)
    x = torch.randn(B, T, C)
    m.eval()
    assert_close(m(x), m(x))
    m.train()
    a, _ = m(x, need_weights=True)
    assert not torch.allclose(a, m(x, need_weights=True)[0])
    assert m(x).shape == (B, T, C)


def test_mha_errors():
    with pytest.raises(ValueError, match="divisible by n_heads"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="n_heads must be a positive int"):
        MultiHeadAttention(8, 0)
    with pytest.raises(ValueError, match="dropout must lie"):
        MultiHeadAttention(8, 2, dropout=1.0)
    m = MultiHeadAttention(C, H)
    with pytest.raises(ValueError, match=r"x should have shape \(B, T, 12\)"):
        m(torch.randn(B, T, 8))
    with pytest.raises(ValueError, match="context should have shape"):
        m(torch.randn(B, T, C), context=torch.randn(3, 4, C))
    with pytest.raises(ValueError, match="either mask or is_causal"):
        m(torch.randn(B, T, C), mask=causal_mask(T), is_causal=True, need_weights=True)
    with pytest.raises(ValueError, match="either mask or is_causal"):
        m(torch.randn(B, T, C), mask=causal_mask(T), is_causal=True)
    with pytest.raises(ValueError, match="Tq == Tk"):
        m(torch.randn(B, T, C), context=torch.randn(B, 7, C), is_causal=True, need_weights=True)


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
    with pytest.raises(ValueError, match="eps must be positive"):
        LayerNorm(4, eps=0.0)
    with pytest.raises(ValueError, match=r"x should have shape \(\.\.\., 4\)"):
        LayerNorm(4)(torch.randn(3, 5))


def _torch_block(ours: TransformerBlock) -> nn.TransformerEncoderLayer:
    """nn.TransformerEncoderLayer (relu, no dropout) holding our block's weights."""
    ref = nn.TransformerEncoderLayer(C, H, 4 * C, dropout=0.0, activation="relu", batch_first=True,
                                     norm_first=ours.norm == "pre", bias=False)
    ref.self_attn.load_state_dict(_torch_mha(ours.attn).state_dict())
    with torch.no_grad():
        ref.linear1.weight.copy_(ours.ffn.up.weight)
        ref.linear2.weight.copy_(ours.ffn.down.weight)
        for mine, theirs in ((ours.ln1, ref.norm1), (ours.ln2, ref.norm2)):
            mine.weight.normal_()
            theirs.weight.copy_(mine.weight)
    return ref


@pytest.mark.parametrize("norm", ["pre", "post"])
@pytest.mark.parametrize("causal", [False, True])
def test_block_matches_torch_encoder_layer(norm, causal):
    torch.manual_seed(4)
    ours = TransformerBlock(C, H, norm=norm, causal=causal, activation="relu")
    ref = _torch_block(ours).eval()
    x = torch.randn(B, T, C)
    mask = nn.Transformer.generate_square_subsequent_mask(T) if causal else None
    assert_close(ours(x), ref(x, src_mask=mask, is_causal=causal))


def test_block_flags_and_mask():
    torch.manual_seed(5)
    x = torch.randn(B, T, C)
    bare = TransformerBlock(C, H, residual=False, use_ffn=False, use_norm=False)
    assert bare.ffn is None and isinstance(bare.ln1, nn.Identity)
    assert_close(bare(x), bare.attn(x, is_causal=True))
    res = TransformerBlock(C, H, use_ffn=False, use_norm=False)
    assert_close(res(x), x + res.attn(x, is_causal=True))
    post = TransformerBlock(C, H, norm="post", residual=False)
    h = post.ln1(post.attn(x, is_causal=True))
    assert_close(post(x), post.ln2(post.ffn(h)))
    # a padding mask on top of the causal one: blocked keys change nothing for earlier queries
    blk = TransformerBlock(C, H).eval()
    keep = torch.ones(B, 1, 1, T, dtype=torch.bool)
    keep[:, ..., -1] = False
    assert_close(blk(x, mask=keep)[:, :-1], blk(x)[:, :-1])
    enc = TransformerBlock(C, H, causal=False)
    assert enc(x, mask=keep).shape == (B, T, C)


def test_block_params_is_12_d_squared():
    for d_model, n_heads in ((12, 3), (64, 4)):
        blk = TransformerBlock(d_model, n_heads)
        weights = sum(p.numel() for n, p in blk.named_parameters() if not n.startswith("ln"))
        assert weights == block_params(d_model) == 12 * d_model**2
    assert block_params(8, 10) == 4 * 64 + 2 * 8 * 10


def test_block_errors():
    with pytest.raises(ValueError, match="norm must be one of"):
        TransformerBlock(8, 2, norm="middle")
    with pytest.raises(ValueError, match="divisible by n_heads"):
        TransformerBlock(8, 3)
    with pytest.raises(ValueError, match=r"x should have shape \(B, T, 8\)"):
        TransformerBlock(8, 2)(torch.randn(4, 8))


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


# ---- the encoder-decoder's decoder layer (Chapter 8) -------------------------------------------
def _copy_into_torch_decoder_layer(ours, theirs):
    """Load a DecoderBlock's weights into an nn.TransformerDecoderLayer (packed in_proj for q, k, v)."""
    with torch.no_grad():
        for mine, ref in ((ours.self_attn, theirs.self_attn), (ours.cross_attn, theirs.multihead_attn)):
            ref.in_proj_weight.copy_(torch.cat([mine.q_proj.weight, mine.k_proj.weight, mine.v_proj.weight]))
            ref.in_proj_bias.copy_(torch.cat([mine.q_proj.bias, mine.k_proj.bias, mine.v_proj.bias]))
            ref.out_proj.weight.copy_(mine.out_proj.weight)
            ref.out_proj.bias.copy_(mine.out_proj.bias)
        theirs.linear1.load_state_dict(ours.ffn.up.state_dict())
        theirs.linear2.load_state_dict(ours.ffn.down.state_dict())
        for ln, ref in ((ours.ln1, theirs.norm1), (ours.ln2, theirs.norm2), (ours.ln3, theirs.norm3)):
            ref.weight.copy_(ln.weight)
            ref.bias.copy_(ln.bias)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_decoder_block_equals_torch_decoder_layer(norm):
    from book.layers import DecoderBlock

    torch.manual_seed(0)
    B, T, S, C, H = 2, 5, 7, 16, 4
    ours = DecoderBlock(C, H, 32, norm=norm).eval()
    with torch.no_grad():
        for ln in (ours.ln1, ours.ln2, ours.ln3):          # non-trivial norms, so a swapped norm is caught
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.5, 0.5)
    theirs = torch.nn.TransformerDecoderLayer(C, H, 32, dropout=0.0, activation="relu", batch_first=True,
                                              norm_first=norm == "pre").eval()
    _copy_into_torch_decoder_layer(ours, theirs)
    x, memory = torch.randn(B, T, C), torch.randn(B, S, C)
    keep = torch.ones(B, S, dtype=torch.bool)
    keep[1, 5:] = False                                     # the second source sentence has 2 padding tokens
    want = theirs(x, memory, tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(T),
                  tgt_is_causal=True, memory_key_padding_mask=~keep)
    got, weights = ours(x, memory, memory_mask=keep, need_weights=True)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert weights.shape == (B, H, T, S)                    # queries from the decoder, keys from the encoder
    assert torch.all(weights[1, :, :, 5:] == 0) and torch.allclose(weights.sum(-1), torch.ones(B, H, T))


def test_decoder_block_with_kv_cache_equals_full_pass():
    from book.layers import DecoderBlock, KVCache

    torch.manual_seed(1)
    B, T, S, C, H = 2, 6, 4, 16, 4
    block = DecoderBlock(C, H, norm="pre").eval()
    x, memory = torch.randn(B, T, C), torch.randn(B, S, C)
    full = block(x, memory)
    cache = KVCache(1, B, H, T, C // H)
    steps = []
    for t in range(T):                                      # one target token at a time, memory reused
        steps.append(block(x[:, t:t + 1], memory, cache=cache, layer=0))
        cache.advance(1)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


def test_decoder_block_rejects_bad_memory():
    from book.layers import DecoderBlock

    block = DecoderBlock(8, 2)
    with pytest.raises(ValueError, match=r"memory should have shape \(2, S, 8\)"):
        block(torch.randn(2, 3, 8), torch.randn(3, 4, 8))
    with pytest.raises(ValueError, match=r"memory_mask \(B, S\) should have shape \(2, 4\)"):
        block(torch.randn(2, 3, 8), torch.randn(2, 4, 8), memory_mask=torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="norm must be one of"):
        DecoderBlock(8, 2, norm="middle")
