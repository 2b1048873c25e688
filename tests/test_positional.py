"""Tests for book.positional: sinusoidal, learned and rotary position encodings."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from book.positional import (LearnedPositionalEmbedding, RotaryEmbedding, SinusoidalPositionalEncoding, apply_rotary,
                             pair_frequencies, sinusoidal_table)
from book.chapters.ch05 import check_shift_matrix, rope_rotation_matrix, sinusoidal_shift_matrix

B, H, T, D, C = 2, 3, 5, 8, 12  # all distinct, T > 1


def test_pair_frequencies():
    f = pair_frequencies(4)
    torch.testing.assert_close(f, torch.tensor([1.0, 0.01], dtype=torch.float64))
    assert pair_frequencies(D).shape == (D // 2,)
    with pytest.raises(ValueError, match="positive even int"):
        pair_frequencies(7)
    with pytest.raises(ValueError, match="base must be > 1"):
        pair_frequencies(4, base=1.0)


def test_sinusoidal_table_matches_paper_formula():
    pe = sinusoidal_table(T, C)
    assert pe.shape == (T, C) and pe.dtype == torch.float32
    for pos in range(T):
        for i in range(C // 2):
            angle = pos / 10000 ** (2 * i / C)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    torch.testing.assert_close(sinusoidal_table(3, C, start=2), pe[2:5])
    with pytest.raises(ValueError, match="must be >= 0"):
        sinusoidal_table(-1, C)


@settings(max_examples=25, deadline=None)
@given(k=st.integers(-40, 40), d=st.sampled_from([2, 4, 8, 16, 64]))
def test_shift_matrix_moves_every_position(k, d):
    pe = sinusoidal_table(200, d, start=0).double()
    pos = torch.arange(max(0, -k), 200 - max(0, k))
    got = pe[pos] @ sinusoidal_shift_matrix(k, d).T
    torch.testing.assert_close(got, pe[pos + k], atol=1e-5, rtol=0)


def test_shift_matrix_is_a_rotation():
    M = sinusoidal_shift_matrix(7, C)
    torch.testing.assert_close(M @ M.T, torch.eye(C, dtype=torch.float64))
    torch.testing.assert_close(sinusoidal_shift_matrix(3, C) @ sinusoidal_shift_matrix(4, C), M)


def test_sinusoidal_module_conventions():
    m = SinusoidalPositionalEncoding(C, context_len=8)
    assert len(list(m.parameters())) == 0
    torch.testing.assert_close(m(T), sinusoidal_table(T, C))
    x = torch.randn(B, T, C)
    torch.testing.assert_close(m(x), x + sinusoidal_table(T, C))
    torch.testing.assert_close(m(x, offset=2), x + sinusoidal_table(T + 2, C)[2:])
    # beyond the buffer: computed from the formula, no hard limit
    torch.testing.assert_close(m(20), sinusoidal_table(20, C))
    torch.testing.assert_close(m(4, offset=30), sinusoidal_table(34, C)[30:], atol=1e-6, rtol=0)
    assert "pe" not in m.state_dict()


def test_absolute_modules_reject_bad_inputs():
    s, l = SinusoidalPositionalEncoding(C, context_len=8), LearnedPositionalEmbedding(C, 8)
    for mod in (s, l):
        with pytest.raises(ValueError, match=rf"x should have shape \(B, T, {C}\)"):
            mod(torch.randn(B, T, C + 1))
        with pytest.raises(ValueError, match="must be >= 0"):
            mod(3, offset=-1)
    with pytest.raises(ValueError, match="positive even int"):
        SinusoidalPositionalEncoding(7)
    with pytest.raises(ValueError, match="context_len must be a positive int, got 0"):
        LearnedPositionalEmbedding(C, 0)


def test_learned_positions_and_hard_limit():
    torch.manual_seed(0)
    m = LearnedPositionalEmbedding(C, 8)
    assert m.weight.shape == (8, C) and m.weight.requires_grad
    x = torch.randn(B, T, C)
    torch.testing.assert_close(m(x), x + m.weight[:T])
    torch.testing.assert_close(m(3, offset=5), m.weight[5:8])
    with pytest.raises(IndexError, match=r"learned positions exist only for 0\.\.7"):
        m(9)
    with pytest.raises(IndexError, match="asked for up to 8"):
        m(4, offset=5)
    m(x).sum().backward()
    assert (m.weight.grad[:T] != 0).all() and (m.weight.grad[T:] == 0).all()  # unused rows never learn


def test_rope_rotation_matrix_is_orthogonal_and_composes():
    R3, R5 = rope_rotation_matrix(3, D), rope_rotation_matrix(5, D)
    torch.testing.assert_close(R3 @ R3.T, torch.eye(D, dtype=torch.float64))
    torch.testing.assert_close(R3.T @ R5, rope_rotation_matrix(2, D))


@settings(max_examples=30, deadline=None)
@given(m=st.integers(0, 300), n=st.integers(0, 300), seed=st.integers(0, 1000))
def test_rope_relative_property(m, n, seed):
    """(R_m q) . (R_n k) == q . R_(n-m) k: the score depends only on n - m."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(D, generator=g, dtype=torch.float64), torch.randn(D, generator=g, dtype=torch.float64)
    lhs = (rope_rotation_matrix(m, D) @ q) @ (rope_rotation_matrix(n, D) @ k)
    rhs = q @ (rope_rotation_matrix(n - m, D) @ k)
    torch.testing.assert_close(lhs, rhs)


def test_rotary_module_matches_matrices_and_preserves_norms():
    rope = RotaryEmbedding(D, context_len=16)
    x = torch.randn(B, H, T, D)
    y = rope(x)
    assert y.shape == x.shape
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))
    for t in range(T):
        torch.testing.assert_close(y[:, :, t], x[:, :, t] @ rope_rotation_matrix(t, D).float().T)
    torch.testing.assert_close(rope(x), y)
    assert len(list(rope.parameters())) == 0 and not rope.state_dict()


def test_rotary_scores_depend_only_on_offset():
    rope = RotaryEmbedding(D)
    q, k = torch.randn(1, 1, 1, D), torch.randn(1, 1, 1, D)
    scores = [(rope(q, offset=m) * rope(k, offset=m + 3)).sum().item() for m in (0, 7, 50, 400)]
    assert max(scores) - min(scores) < 1e-4


def test_rotary_offset_is_kv_cache_consistent_and_extends_past_max_len():
    rope = RotaryEmbedding(D, context_len=6)
    x = torch.randn(B, H, 10, D)
    full = rope(x)  # positions 6..9 computed from the formula
    torch.testing.assert_close(torch.cat([rope(x[:, :, :4]), rope(x[:, :, 4:], offset=4)], 2), full)
    torch.testing.assert_close(rope(x[:, :, 9:], offset=9), full[:, :, 9:])
    big = RotaryEmbedding(D, context_len=32)
    torch.testing.assert_close(full, big(x))


def test_rotary_interpolation_rotates_token_t_as_position_t_over_s():
    """Position interpolation: with s = 2.5, token 5t gets plain RoPE's rotation of position 2t, in the cache and
    beyond it; set_interpolation(1) gives plain RoPE back, bit for bit."""
    x = torch.randn(1, 1, 40, D)
    plain, pi = RotaryEmbedding(D, context_len=8), RotaryEmbedding(D, context_len=8, interpolation=2.5)
    by_plain = torch.cat([plain(x[:, :, t:t + 1], offset=2 * t // 5) for t in range(0, 40, 5)], 2)
    torch.testing.assert_close(pi(x)[:, :, ::5], by_plain)
    q, k = torch.randn(1, 1, 1, D), torch.randn(1, 1, 1, D)
    score = lambda r, m, n: (r(q, offset=m) * r(k, offset=n)).sum().item()
    assert abs(score(pi, 3, 3 + 25) - score(plain, 3, 3 + 10)) < 1e-4      # distance 25 reads as distance 10
    assert torch.equal(pi.set_interpolation(1)(x), plain(x))
    assert pi.interpolation == 1.0


@pytest.mark.parametrize("bad", [0, -2.0, float("nan"), float("inf"), "2", True])
def test_rotary_interpolation_errors(bad):
    with pytest.raises(ValueError, match="interpolation must be"):
        RotaryEmbedding(D, interpolation=bad)
    with pytest.raises(ValueError, match="interpolation must be"):
        RotaryEmbedding(D).set_interpolation(bad)


def test_rotary_errors():
    with pytest.raises(ValueError, match="d_head must be a positive even int"):
        RotaryEmbedding(5)
    rope = RotaryEmbedding(D)
    with pytest.raises(ValueError, match=rf"x should have shape \(\.\.\., T, {D}\)"):
        rope(torch.randn(B, H, T, D + 2))
    with pytest.raises(ValueError, match="offset must be >= 0"):
        rope(torch.randn(B, H, T, D), offset=-1)


def test_apply_rotary_keeps_dtype():
    x = torch.randn(T, D, dtype=torch.float64)
    cos, sin = RotaryEmbedding(D).cos_sin(T)
    assert apply_rotary(x, cos, sin).dtype == torch.float64


def test_check_shift_matrix_accepts_reference_and_rejects_wrong():
    assert check_shift_matrix(sinusoidal_shift_matrix)
    assert check_shift_matrix(lambda k, d: sinusoidal_shift_matrix(k, d).numpy())
    with pytest.raises(AssertionError, match="is not PE"):
        check_shift_matrix(lambda k, d: sinusoidal_shift_matrix(k, d).T)  # the inverse shift
    with pytest.raises(AssertionError, match="should have shape"):
        check_shift_matrix(lambda k, d: torch.eye(d + 1))


# ---- the chapter 5 order task (book.chapters.ch05.bites_batch) ------------------------------------
from book.tasks import BITES_VOCAB  # noqa: E402
from book.chapters.ch05 import bites_batch  # noqa: E402


def test_bites_batch_answer_is_the_noun_before_the_verb():
    g = torch.Generator().manual_seed(0)
    x, pos, y = bites_batch(64, 12, generator=g)
    assert x.shape == (64, 12) and pos.shape == (64,) and y.shape == (64,)
    rows = torch.arange(64)
    verb = BITES_VOCAB.index("bites")
    assert (x[rows, pos] == verb).all() and ((x == verb).sum(1) == 1).all()
    assert torch.equal(x[rows, pos - 1], y)
    assert (x[rows, pos + 1] != y).all() and (x[rows, pos + 1] < 8).all()
    assert ((x < 8).sum(1) == 2).all()  # no distractors: exactly two nouns, same bag either order
    assert ((pos >= 1) & (pos <= 10)).all()


def test_bites_batch_options_and_errors():
    g = torch.Generator().manual_seed(1)
    x, pos, _ = bites_batch(32, 40, min_verb_pos=20, distractor_p=0.5, generator=g)
    assert (pos >= 20).all() and ((x < 8).sum(1) > 2).any()
    with pytest.raises(ValueError, match="min_verb_pos"):
        bites_batch(4, 10, min_verb_pos=9)
    with pytest.raises(ValueError, match="distractor_p"):
        bites_batch(4, 10, distractor_p=1.5)


# ---- ALiBi and the copy-back model -------------------------------------------------------------
from book.positional import POSITION_SCHEMES, CopyBackModel, alibi_bias, alibi_slopes  # noqa: E402


def test_alibi_slopes_are_the_papers_geometric_sequence():
    torch.testing.assert_close(alibi_slopes(4), torch.tensor([1 / 4, 1 / 16, 1 / 64, 1 / 256]))
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -h for h in range(1, 9)]))
    # not a power of two: the 4 slopes of H=4, then every other slope of H=8 (the paper's code)
    torch.testing.assert_close(alibi_slopes(6), torch.tensor([1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8]))
    with pytest.raises(ValueError, match="n_heads must be a positive int"):
        alibi_slopes(0)


def test_alibi_bias_by_hand():
    # H = 2: slopes 2^-4 = 1/16 and 2^-8 = 1/256; bias[h, i, j] = -m_h |i - j|
    expected = -torch.tensor([1 / 16, 1 / 256])[:, None, None] * torch.tensor([[0., 1, 2], [1, 0, 1], [2, 1, 0]])
    torch.testing.assert_close(alibi_bias(3, 2), expected)
    # two queries after three cached keys: positions 3 and 4 against keys 0..4
    assert alibi_bias(2, 1, Tk=5)[0, :, 0].tolist() == [-3 / 256, -4 / 256]
    torch.testing.assert_close(alibi_bias(2, 2, Tk=5), alibi_bias(5, 2)[:, 3:])
    with pytest.raises(ValueError, match="Tk must be >= T"):
        alibi_bias(4, 2, Tk=3)
    with pytest.raises(ValueError, match="start must be an int >= 0"):
        alibi_bias(2, 2, start=-1)
    assert alibi_bias(1, 1, Tk=3, start=0)[0, 0].tolist() == [0.0, -1 / 256, -2 / 256]   # query at 0, keys ahead


def test_alibi_model_equals_sdpa_with_a_float_bias():
    """An independent formulation: PyTorch's fused attention with the bias and the causal mask as a float mask."""
    torch.manual_seed(0)
    model = CopyBackModel(7, "alibi", d_model=12, n_heads=3)
    x = torch.randint(0, 7, (B, T))
    h, q, k, v = model._embed_qkv(x)
    float_mask = alibi_bias(T, 3).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    fused = F.scaled_dot_product_attention(q, k, v, attn_mask=float_mask)            # (B, H, T, D)
    expected = model.readout(h + model.out_proj(fused.transpose(1, 2).flatten(2)))[:, -1]
    torch.testing.assert_close(model(x), expected)
    w = model.weights(x)
    assert w.shape == (B, 3, T, T) and torch.all(w.triu(1) == 0)


def test_alibi_prefers_the_nearer_of_two_equal_keys():
    model = CopyBackModel(5, "alibi", d_model=8, n_heads=2)
    with torch.no_grad():
        model.q_proj.weight.zero_()                 # every content score 0: only the bias is left
    w = model.weights(torch.randint(0, 5, (1, 6)))[0, :, -1]   # (H, T) the last query's weights
    assert torch.all(w[:, 1:] > w[:, :-1])          # nearer keys get more weight, in every head
    ratio = w[:, -1] / w[:, -2]
    torch.testing.assert_close(ratio, torch.exp(alibi_slopes(2)))


@pytest.mark.parametrize("scheme", POSITION_SCHEMES)
def test_copy_back_model_shapes_and_causality(scheme):
    model = CopyBackModel(9, scheme, d_model=16, n_heads=2, context_len=12)
    x = torch.randint(0, 9, (B, 7))
    assert model(x).shape == (B, 9)
    w = model.weights(x)
    assert w.shape == (B, 2, 7, 7) and torch.allclose(w.sum(-1), torch.ones(B, 2, 7))
    assert torch.all(w.triu(1) == 0)                # causal: no query sees a later key
    y = x.clone()
    y[:, -1] = (y[:, -1] + 1) % 9                   # a change at the end reaches no earlier query
    torch.testing.assert_close(model.weights(y)[:, :, :-1], w[:, :, :-1])


def test_copy_back_model_rope_is_shift_invariant_and_learned_has_a_wall():
    torch.manual_seed(1)
    rope = CopyBackModel(9, "rope", d_model=16, n_heads=2)
    x = torch.randint(0, 9, (B, 6))
    # the same queries and keys moved 5 positions along give the same weights: only distances count
    q, k = torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)
    torch.testing.assert_close(rope._weights(rope.rope(q, offset=5), rope.rope(k, offset=5)),
                               rope._weights(rope.rope(q), rope.rope(k)))
    assert rope(x).shape == (B, 9)
    learned = CopyBackModel(9, "learned", d_model=16, n_heads=2, context_len=8)
    with pytest.raises(IndexError, match="learned positions exist only for 0..7"):
        learned(torch.zeros(1, 9, dtype=torch.long))


def test_copy_back_model_bad_inputs():
    with pytest.raises(ValueError, match="positions must be one of"):
        CopyBackModel(9, "relative")
    with pytest.raises(ValueError, match="must be an even int"):
        CopyBackModel(9, "rope", d_model=12, n_heads=4)
    with pytest.raises(ValueError, match="x must be 2-D"):
        CopyBackModel(9)(torch.zeros(2, 3, 4, dtype=torch.long))


def test_check_rotate_half_accepts_the_neox_layout_and_rejects_the_interleaved_one():
    from book.chapters.ch05 import check_rotate_half

    def rotate_half_rope(x, offset):
        D = x.shape[-1]
        cos, sin = RotaryEmbedding(D).cos_sin(x.shape[-2], offset)
        cos, sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)         # (T, D): pair i at i and i + D/2
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin                          # HF's rotate_half

    assert check_rotate_half(rotate_half_rope) and check_rotate_half(rotate_half_rope, d_head=12)
    with pytest.raises(AssertionError, match="rotate-half layout"):
        check_rotate_half(lambda x, offset: RotaryEmbedding(x.shape[-1])(x, offset))   # interleaved: wrong pairs
    with pytest.raises(AssertionError, match="should return a tensor"):
        check_rotate_half(lambda x, offset: None)


@pytest.mark.parametrize("scheme", ["none", "sinusoidal", "learned", "rope"])
def test_copy_back_model_is_attention_with_written_out_weights_bit_for_bit(scheme):
    # what CopyBackModel's comment claims for a later switch to book.attention.Attention: built at the same point
    # of the random stream, Attention's projections are the model's, and its need_weights=True path (not the fused
    # kernel) gives the model's logits and weights exactly. ALiBi would need an additive score bias on Attention.
    from book.attention import Attention

    torch.manual_seed(0)
    model = CopyBackModel(9, scheme, d_model=16, n_heads=2, context_len=24)
    torch.manual_seed(0)
    torch.nn.Embedding(9, 16)                     # the model's embedding, then its position table
    if scheme == "learned":
        LearnedPositionalEmbedding(16, 24, init_std=0.7)
    attn = Attention(16, 2, rope=model.rope if model.rope is not None else False)
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        assert torch.equal(getattr(attn, name).weight, getattr(model, name).weight), name
    x = torch.randint(0, 9, (3, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        h = model.embed(x)
        h = model.absolute(h) if model.absolute is not None else h
        out, weights = attn(h, causal=True, need_weights=True)
        assert torch.equal(model.readout((h + out)[:, -1]), model(x))
        assert torch.equal(weights, model.weights(x))
