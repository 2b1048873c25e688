"""Chapter 7's from-scratch cells (tagged `scratch`) agree with book.gpt, book.attention and book.generate."""
import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from book.attention import Attention
from book.generate import greedy, next_token_probs, top_k_filter, top_p_filter
from book.gpt import GPT, GPTConfig
from nbtools import scratch_namespace

B, H, T, D, V = 2, 3, 5, 8, 11  # all distinct, T > 1
C = H * D


@pytest.fixture(scope="module")
def ns():
    return scratch_namespace("07_training_gpt.ipynb")


def test_scratch_gpt_equals_package_gpt(ns):
    torch.manual_seed(0)
    ours = ns["ScratchGPT"](V, context_len=7, d_model=C, n_heads=H, n_layers=2).eval()
    book = GPT(GPTConfig(vocab_size=V, context_len=7, d_model=C, n_heads=H, n_layers=2, bias=True)).eval()
    book.load_state_dict(ours.state_dict())
    idx = torch.randint(V, (B, T))
    logits = ours(idx)
    assert logits.shape == (B, T, V)
    assert_close(logits, book(idx))
    assert ours.lm_head.weight is ours.tok_emb.weight


def test_sampling_filters(ns):
    torch.manual_seed(1)
    z = torch.randn(B, T, V) * 2
    assert torch.equal(ns["greedy_scratch"](z), greedy(z))
    assert_close(ns["temperature_probs"](z, 0.6), next_token_probs(z, temperature=0.6))
    for k in (1, 3, V):
        assert_close(ns["top_k_scratch"](z, k), top_k_filter(z, k))
    for p in (0.2, 0.75, 1.0):
        assert_close(ns["top_p_scratch"](z, p), top_p_filter(z, p))


def test_cached_attention_equals_causal_attention(ns):
    torch.manual_seed(2)
    q, k, v = (torch.randn(B, H, T, D) for _ in range(3))
    cache = ns["ScratchKVCache"]()
    steps = [ns["attend_with_cache"](q[:, :, t:t + 1], k[:, :, t:t + 1], v[:, :, t:t + 1], cache) for t in range(T)]
    assert_close(torch.cat(steps, dim=2), F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert cache.k.shape == (B, H, T, D)


def test_scratch_cache_matches_package_attention_with_cache(ns):
    """The notebook's ScratchKVCache + attend_with_cache, fed one token at a time (through the same q/k/v/out
    projections), gives the package's cached attention, holds the same keys/values as its KVCache, and
    matches the full causal pass."""
    torch.manual_seed(3)
    attn = Attention(C, H).eval()
    model = GPT(GPTConfig(vocab_size=V, context_len=T, d_model=C, n_heads=H, n_layers=1))
    cache, scratch = model.new_cache(B), ns["ScratchKVCache"]()
    x = torch.randn(B, T, C)
    ours, book = [], []
    with torch.no_grad():
        for t in range(T):
            xt = x[:, t:t + 1]                                                   # (B, 1, C): one new token
            q, k, v = (p(xt).view(B, 1, H, D).transpose(1, 2) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
            o = ns["attend_with_cache"](q, k, v, scratch)                        # (B, H, 1, D)
            ours.append(attn.out_proj(o.transpose(1, 2).reshape(B, 1, C)))
            book.append(attn(xt, causal=True, cache=cache, layer=0))
            cache.advance(1)
        full = attn(x, causal=True)
    assert scratch.k.shape == (B, H, T, D)
    assert_close(scratch.k, cache.k[0])
    assert_close(scratch.v, cache.v[0])
    assert_close(torch.cat(ours, 1), torch.cat(book, 1))
    assert_close(torch.cat(ours, 1), full)


def test_the_quoting_test_the_chapter_describes_is_the_benchmarks():
    """book.chapters.ch07.QUOTE_TEST, which the chapter's prose glues, against benchmarks/budget_leaderboard.py: the
    passage's length, the number and size of the windows, the training passages' lengths, and the characters
    between the two copies, measured on the benchmark's own validation windows."""
    import inspect
    import sys
    from pathlib import Path

    from book.chapters.ch07 import QUOTE_TEST

    bench_dir = str(Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, bench_dir)
    try:
        import budget_leaderboard as bl
    finally:
        sys.path.remove(bench_dir)
    assert (bl.QUOTE_LEN, bl.EVAL_WINDOWS) == (QUOTE_TEST["eval_len"], QUOTE_TEST["eval_windows"])
    assert "quote_windows(train_ids, B, T, gen, {}, {})".format(*QUOTE_TEST["train_len"]) in \
        inspect.getsource(bl.run_job)
    w, first, second = bl.quote_eval_windows(torch.randint(0, 65, (5000,)), 4096, QUOTE_TEST["window"] - 1)
    assert w.shape[1] == QUOTE_TEST["window"]
    between = second - first - bl.QUOTE_LEN                 # characters between the end of one copy and the next
    assert (between.min().item(), between.max().item()) == QUOTE_TEST["gap"]
    rows, idx = torch.arange(len(w))[:, None], torch.arange(bl.QUOTE_LEN)
    assert torch.equal(w[rows, first[:, None] + idx], w[rows, second[:, None] + idx])
