"""book.transformer.Transformer: equal to nn.Transformer with copied weights; cached greedy == uncached; bad input."""
import pytest
import torch
import torch.nn as nn
from torch.testing import assert_close

from book.generate import greedy_translate
from book.attention import causal_mask
from book.transformer import Transformer, TransformerConfig
from book.chapters.ch08 import to_torch_transformer

B, S, T, C, H, F, L, V_SRC, V_TGT = 2, 7, 5, 24, 3, 40, 2, 11, 13   # all distinct, T > 1


def _model(norm="post", **kw) -> Transformer:
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(V_SRC, V_TGT, context_len=16, d_model=C, n_heads=H, n_layers=L, d_ff=F,
                                          norm=norm, **kw)).eval()
    with torch.no_grad():   # non-trivial norms, so a swapped or missing norm is caught
        for name, p in model.named_parameters():
            if "ln" in name:
                p.uniform_(0.5, 1.5) if name.endswith("weight") else p.uniform_(-0.5, 0.5)
    return model


def _batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, V_SRC, (B, S), generator=g)
    src[1, 5:] = 0                                          # the second sentence has two padding tokens
    return src, torch.randint(1, V_TGT, (B, T), generator=g)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_equals_torch_transformer(norm):
    model = _model(norm)
    ref = to_torch_transformer(model)
    assert isinstance(ref, nn.Transformer)
    src, tgt = _batch()
    keep = src != 0
    x_src = model.pos(model.src_emb(src) * C ** 0.5)
    x_tgt = model.pos(model.tgt_emb(tgt) * C ** 0.5)
    want_memory = ref.encoder(x_src, src_key_padding_mask=~keep)
    assert_close(model.encode(src), want_memory, atol=1e-5, rtol=1e-5)
    want = ref(x_src, x_tgt, tgt_mask=~causal_mask(T), tgt_is_causal=True,
               src_key_padding_mask=~keep, memory_key_padding_mask=~keep)   # PyTorch: True = padding
    got = model(src, tgt)
    assert got.shape == (B, T, V_TGT)
    assert_close(got, model.lm_head(want), atol=1e-5, rtol=1e-5)


def test_decode_weights_and_cache_equal_full_pass():
    model = _model()
    src, tgt = _batch(2)
    keep = model.src_keep_mask(src)
    memory = model.encode(src)
    assert_close(model.encode(src, src_keep=keep), memory)
    assert not torch.allclose(model.encode(src, src_keep=torch.ones_like(keep)), memory)   # padding seen
    full, weights = model.decode(tgt, memory, keep, need_weights=True)
    assert len(weights) == L and weights[0].shape == (B, H, T, S)
    assert torch.all(weights[1][1, :, :, 5:] == 0)          # padding gets no cross-attention
    assert_close(weights[0].sum(-1), torch.ones(B, H, T))
    cache = model.new_cache(B, T)
    steps = [model.decode(tgt[:, t:t + 1], memory, keep, cache=cache) for t in range(T)]
    assert cache.length == T
    assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


def test_cached_greedy_equals_uncached_and_reencoded():
    model = _model()
    src, _ = _batch(3)
    ids = greedy_translate(model, src, 9, use_cache=False)
    assert ids.shape[0] == B and ids.shape[1] <= 9
    assert torch.equal(greedy_translate(model, src, 9), ids)
    assert torch.equal(greedy_translate(model, src, 9, reencode=True), ids)
    ids2, w = greedy_translate(model, src, 9, need_weights=True)
    assert torch.equal(ids2, ids) and w.shape == (L, B, H, ids.shape[1], S)


def test_greedy_stops_at_eos_and_pads_after():
    model = _model()
    with torch.no_grad():
        model.lm_head.weight.zero_()
        model.lm_head.weight[2] = 0.0
        model.ln_dec.bias.fill_(1.0)
        model.lm_head.weight[2, :] = 1.0                    # EOS (id 2) always wins
    src, _ = _batch(4)
    ids = greedy_translate(model, src, 6)
    assert ids.tolist() == [[2], [2]]


def test_paper_base_size_counts():
    cfg = TransformerConfig(37000, 37000, context_len=512, d_model=512, n_heads=8, n_layers=6, d_ff=2048,
                            share_embeddings=True, tie_output=True)
    with torch.device("meta"):
        model = Transformer(cfg)
    n = sum(p.numel() for p in model.parameters())
    assert n == 37000 * 512 + 6 * (4 * (512 * 512 + 512) + 2 * 512 * 2048 + 2048 + 512 + 4 * 512) \
        + 6 * (8 * (512 * 512 + 512) + 2 * 512 * 2048 + 2048 + 512 + 6 * 512) + 4 * 512
    assert 60e6 < n < 65e6


@pytest.mark.parametrize("make, error, match", [
    (lambda: TransformerConfig(10, 12, share_embeddings=True), ValueError, "one vocabulary"),
    (lambda: TransformerConfig(10, 10, d_model=30, n_heads=4), ValueError, "divisible"),
    (lambda: TransformerConfig(10, 10, norm="sandwich"), ValueError, "norm"),
    (lambda: TransformerConfig(0, 10), ValueError, "src_vocab_size"),
    (lambda: _model()(torch.zeros(B, S), torch.zeros(B, T, dtype=torch.long)), TypeError, "integer"),
    (lambda: _model()(torch.full((B, S), V_SRC), torch.ones(B, T, dtype=torch.long)), ValueError, r"\[0, 11\)"),
    (lambda: _model()(torch.ones(B, 17, dtype=torch.long), torch.ones(B, T, dtype=torch.long)), ValueError,
     "context_len"),
    (lambda: _model()(torch.ones(B, S, dtype=torch.long), torch.ones(3, T, dtype=torch.long)), ValueError,
     "batch size"),
    (lambda: _model()(torch.zeros(B, S, dtype=torch.long), torch.ones(B, T, dtype=torch.long)), ValueError,
     "non-padding"),
    (lambda: _model().decode(torch.ones(B, T, dtype=torch.long), torch.zeros(B, S, C + 1)), ValueError, "memory"),
    (lambda: _model().decode(torch.ones(B, T, dtype=torch.long), torch.zeros(B, S, C),
                             torch.ones(B, S)), ValueError, "memory_keep"),
    (lambda: _model().decode(torch.ones(B, T, dtype=torch.long), torch.zeros(B, S, C),
                             cache=_model().new_cache(B + 1)), ValueError, "new_cache"),
    (lambda: greedy_translate(_model(), torch.ones(B, S, dtype=torch.long), 0), ValueError, "max_len"),
    (lambda: greedy_translate(_model(), torch.ones(B, S), 3), TypeError, "integer"),
])
def test_bad_inputs(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_count_and_checkers():
    from book.chapters.ch08 import transformer_params
    from book.chapters.ch08 import check_cross_attention, check_transformer_params
    cfg = TransformerConfig(37000, 37000, d_model=64, n_heads=4, n_layers=3, d_ff=96, share_embeddings=True,
                            tie_output=True)
    with torch.device("meta"):
        assert sum(p.numel() for p in Transformer(cfg).parameters()) == transformer_params(37000, 64, 96, 3)
    assert check_transformer_params(transformer_params)
    with pytest.raises(AssertionError, match="expected"):
        check_transformer_params(lambda v, c, f, n: transformer_params(v, c, f, n) - 1)

    def weights(y, memory, attn, keep):
        return attn(y, memory, causal=False, mask=keep[:, None, None, :], need_weights=True)[1]
    assert check_cross_attention(weights)
    with pytest.raises(AssertionError, match="differ"):
        check_cross_attention(lambda y, m, a, k: weights(y, m, a, torch.ones_like(k)))


def test_the_behind_buckets_checker_takes_the_reference_and_rejects_a_near_miss():
    from book.chapters.ch08 import behind_buckets, check_behind_buckets
    assert check_behind_buckets(behind_buckets)
    with pytest.raises(AssertionError, match="expected the buckets"):     # >= instead of >: ties counted as behind
        check_behind_buckets(lambda rec, s: [b for b, v in rec["attention RNN", s].items()
                                             if min(v) >= max(rec["Transformer", s][b])])


def test_the_same_seed_builds_the_same_transformer_whatever_the_memory_layout():
    """The embeddings are drawn source first, then target: not in a set's order, which follows addresses."""
    cfg = TransformerConfig(11, 13, context_len=8, d_model=16, n_heads=2, n_layers=1, d_ff=32)
    built = []
    for k in range(6):
        keep = [torch.empty(1 + 97 * k) for _ in range(k)]   # shift where the next modules are allocated
        torch.manual_seed(0)
        built.append(Transformer(cfg).state_dict())
        del keep
    for other in built[1:]:
        assert all(torch.equal(built[0][n], other[n]) for n in built[0])
