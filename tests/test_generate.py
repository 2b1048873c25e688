"""Tests for book.generate: sampling filters, the generate loop, cached generation equal to uncached."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from book.generate import apply_temperature, generate, greedy, next_token_probs, sample_next, top_k_filter, top_p_filter
from book.chapters.ch07 import check_top_p
from book.gpt import GPT, GPTConfig

B, T, C, H, V = 2, 5, 12, 3, 7  # all distinct, T > 1


def test_greedy_and_temperature():
    logits = torch.tensor([[1.0, 3.0, 2.0], [0.5, -1.0, 0.0]])
    assert greedy(logits).tolist() == [1, 0]
    assert_close(apply_temperature(logits, 0.5), logits * 2)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        apply_temperature(logits, 0.0)


def test_temperature_to_zero_is_greedy():
    torch.manual_seed(0)
    logits = torch.randn(4, 11)
    probs = next_token_probs(logits, temperature=1e-3)
    assert_close(probs, F.one_hot(greedy(logits), 11).float())
    assert_close(next_token_probs(logits, temperature=0), probs)
    g = torch.Generator().manual_seed(0)
    assert torch.equal(sample_next(logits, temperature=1e-3, generator=g), greedy(logits))
    assert torch.equal(sample_next(logits, temperature=0), greedy(logits))


def test_high_temperature_flattens():
    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    hot = next_token_probs(logits, temperature=1e4)
    assert_close(hot, torch.full_like(hot, 0.25), atol=1e-3, rtol=0)


def test_top_k_keeps_k():
    logits = torch.tensor([[0.1, 2.0, -1.0, 3.0, 0.5], [5.0, 4.0, 3.0, 2.0, 1.0]])
    kept = torch.isfinite(top_k_filter(logits, 2))
    assert kept.tolist() == [[False, True, False, True, False], [True, True, False, False, False]]
    assert torch.isfinite(top_k_filter(logits, 99)).all()  # k above V keeps everything
    with pytest.raises(ValueError, match="k must be a positive int"):
        top_k_filter(logits, 0)


def test_top_p_examples():
    probs = torch.tensor([0.5, 0.3, 0.2])
    assert torch.isfinite(top_p_filter(probs.log(), 0.7)).tolist() == [True, True, False]
    assert torch.isfinite(top_p_filter(probs.log(), 0.4)).tolist() == [True, False, False]
    assert torch.isfinite(top_p_filter(probs.log(), 1.0)).all()
    with pytest.raises(ValueError, match=r"p must lie in \(0, 1\]"):
        top_p_filter(probs.log(), 0.0)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.05, 1.0), st.integers(2, 30))
def test_top_p_is_smallest_set_reaching_p(seed, p, vocab):
    """Kept mass >= p, and dropping the least likely kept token would fall below p."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, vocab, generator=g) * 3
    probs = logits.softmax(-1)
    kept = torch.isfinite(top_p_filter(logits, p))
    for row in range(3):
        mass = probs[row][kept[row]]
        assert mass.sum() >= p - 1e-5 or kept[row].all()
        assert mass.sum() - mass.min() < p + 1e-5
        # every kept token is at least as likely as every dropped one
        if (~kept[row]).any():
            assert mass.min() >= probs[row][~kept[row]].max()


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 9))
def test_probs_are_distributions(seed, k):
    logits = torch.randn(2, 9, generator=torch.Generator().manual_seed(seed))
    probs = next_token_probs(logits, temperature=0.8, top_k=k, top_p=0.9)
    assert_close(probs.sum(-1), torch.ones(2))
    assert ((probs > 0).sum(-1) <= k).all()


def test_sample_next_respects_filters_and_errors():
    logits = torch.tensor([[0.0, 5.0, 4.9, -3.0]]).repeat(200, 1)
    g = torch.Generator().manual_seed(0)
    ids = sample_next(logits, temperature=1.0, top_k=2, generator=g)
    assert set(ids.tolist()) == {1, 2}
    with pytest.raises(ValueError, match=r"\(B, V\)"):
        sample_next(logits[0])
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        next_token_probs(logits, temperature=-1.0)


def test_check_top_p_accepts_reference_and_rejects_off_by_one():
    assert check_top_p(top_p_filter)

    def wrong(logits, p):  # drops the token that crosses p
        s, order = logits.sort(-1, descending=True)
        drop = s.softmax(-1).cumsum(-1) > p
        return logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))

    with pytest.raises(AssertionError, match="should keep"):
        check_top_p(wrong)
    with pytest.raises(AssertionError, match="shape"):
        check_top_p(lambda logits, p: logits[0])


def _gpt(**kw):
    torch.manual_seed(0)
    cfg = dict(vocab_size=V, context_len=16, d_model=C, n_heads=H, n_layers=2)
    cfg.update(kw)
    return GPT(GPTConfig(**cfg)).eval()


@pytest.mark.parametrize("n_kv_heads", [None, 1])
def test_cached_logits_equal_uncached(n_kv_heads):
    model = _gpt(n_kv_heads=n_kv_heads)
    idx = torch.randint(V, (B, 11))
    full = model(idx)
    cache = model.new_cache(B)
    pieces = [model(idx[:, :4], cache=cache), model(idx[:, 4:6], cache=cache)]  # prompt, then a chunk
    pieces += [model(idx[:, t:t + 1], cache=cache) for t in range(6, 11)]  # then one token at a time
    assert cache.length == 11
    assert (torch.cat(pieces, 1) - full).abs().max() <= 1e-5


def test_generate_cached_equals_uncached_and_shapes():
    model = _gpt()
    prompt = torch.randint(V, (B, 3))
    plain = generate(model, prompt, 10, temperature=0)
    cached = generate(model, prompt, 10, temperature=0, use_cache=True)
    assert plain.shape == (B, 13) and torch.equal(plain, cached)
    a = generate(model, prompt, 10, top_k=3, generator=torch.Generator().manual_seed(0))
    b = generate(model, prompt, 10, top_k=3, generator=torch.Generator().manual_seed(0), use_cache=True)
    assert torch.equal(a, b)
    long = generate(model, prompt, 20, temperature=0)  # crops to context_len without a cache
    assert long.shape == (B, 23)
    with pytest.raises(ValueError, match="must fit context_len"):
        generate(model, prompt, 20, use_cache=True)
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        generate(model, prompt[0], 2)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, prompt, -1)


def test_generate_restores_training_mode():
    model = _gpt().train()
    generate(model, torch.zeros(1, 1, dtype=torch.long), 2)
    assert model.training
