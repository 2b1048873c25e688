"""Bad input gets a clear error, never silent nonsense or a raw torch error.

One table: each case calls the package with one wrong argument and names the exception type and a
fragment of its message (what was expected and what came). Plus: the exercise checkers reject wrong
answers under `python -O`, and `book/` holds no bare `assert` (which `-O` strips).
"""
import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from book import ngram
from book.attention import attention, padding_mask, scaled_dot_product_attention
from book.generate import generate
from book.attention import Attention
from book.blocks import TransformerBlock
from book.gpt import GPT, GPTConfig
from book.kv_cache import KVCache
from book.train import GPTRecipe
from book.seq2seq import AdditiveAttention
from book.tokenizers import BPETokenizer, CharTokenizer

ROOT = Path(__file__).resolve().parent.parent
B, H, T, C, V = 2, 3, 5, 12, 11  # all distinct, T > 1


def _gpt(**kw):
    torch.manual_seed(0)
    return GPT(GPTConfig(**{"vocab_size": V, "context_len": 16, "d_model": C, "n_heads": H, "n_layers": 2,
                            **kw})).eval()


def _qkv(tq=T, tk=T, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(B, H, tq, 4, generator=g).to(dtype), torch.randn(B, H, tk, 4, generator=g).to(dtype),
            torch.randn(B, H, tk, 4, generator=g).to(dtype))


def _block():
    return TransformerBlock(C, H, causal=True)


def _padding_true_at_pad():
    """A (B, 1, 1, T) mask in the opposite convention: True at padding; the second sequence has none."""
    return ~padding_mask(torch.tensor([3, T]), T)


def _square_batch_mask():
    """A (B, T) padding mask with B == T: same shape as a (Tq, Tk) mask, so silently misread before."""
    return padding_mask(torch.tensor([1, 2, 3, 4, 5]), T)[:, 0, 0]  # (T, T), rows differ


def _cache_update_bad_layer():
    cache = KVCache(n_layers=2, batch_size=B, n_kv_heads=H, context_len=8, d_head=4)
    cache.update(2, torch.zeros(B, H, 1, 4), torch.zeros(B, H, 1, 4))


def _cache_update_wrong_shape():
    cache = KVCache(n_layers=2, batch_size=B, n_kv_heads=H, context_len=8, d_head=4)
    cache.update(0, torch.zeros(B + 1, H, 1, 4), torch.zeros(B + 1, H, 1, 4))


def _cache_advance(n):
    cache = KVCache(n_layers=1, batch_size=B, n_kv_heads=H, context_len=4, d_head=4)
    cache.advance(n)


def _gpt_with_wrong_batch_cache():
    model = _gpt()
    model(torch.zeros(B, 3, dtype=torch.long), cache=model.new_cache(B + 1))


# (id, call, exception type, message fragment)
CASES = [
    # ---- masks (book.attention, book.blocks) ------------------------------------------------------
    ("mha-(B,T)-mask-with-B==T", lambda: Attention(C, H)(torch.randn(T, T, C), causal=False, mask=_square_batch_mask()),
     ValueError, "ambiguous when the batch size B = 5 equals Tq = 5"),
    ("block-(B,T)-mask-with-B==T", lambda: _block()(torch.randn(T, T, C), mask=_square_batch_mask()),
     ValueError, "could be a (Tq, Tk) mask or a (B, Tk) padding mask"),
    ("mha-(B,T)-mask-with-B!=T", lambda: Attention(C, H)(torch.randn(B, T, C), causal=False, mask=torch.ones(B, T) > 0),
     ValueError, "padding mask must be passed as (B, 1, 1, Tk) = (2, 1, 1, 5)"),
    ("mha-3d-mask", lambda: Attention(C, H)(torch.randn(B, T, C), causal=False, mask=torch.ones(B, T, T) > 0),
     ValueError, "mask must be 2-D (Tq, Tk) or 4-D (B, H, Tq, Tk)"),
    ("mha-4d-mask-wrong-batch", lambda: Attention(C, H)(torch.randn(B, T, C), causal=False,
                                                           mask=torch.ones(3, 1, 1, T) > 0),
     ValueError, "a 4-D mask must be (B | 1, H | 1, Tq | 1, Tk | 1) with B = 2"),
    ("sdpa-mask-true-at-padding", lambda: scaled_dot_product_attention(*_qkv(), _padding_true_at_pad()),
     ValueError, "True = may attend"),
    ("attention-mask-true-at-padding", lambda: attention(*_qkv(), mask=_padding_true_at_pad()),
     ValueError, "whose attention weights would be NaN"),
    ("mha-mask-true-at-padding", lambda: Attention(C, H)(torch.randn(B, T, C), causal=False,
                                                            mask=_padding_true_at_pad()),
     ValueError, "True = may attend"),
    ("block-mask-true-at-padding", lambda: _block()(torch.randn(B, T, C), mask=_padding_true_at_pad()),
     ValueError, "must be inverted with ~mask"),
    ("block-float-mask", lambda: _block()(torch.randn(B, T, C), mask=torch.ones(B, 1, 1, T)),
     ValueError, "mask must be a bool tensor (True = may attend), got dtype torch.float32"),
    ("gqa-(B,T)-mask-with-B==T", lambda: Attention(C, H, 1)(torch.randn(T, T, C), causal=True,
                                                             mask=_square_batch_mask()),
     ValueError, "is ambiguous"),
    ("mha-float64-input", lambda: Attention(C, H)(torch.randn(B, T, C, dtype=torch.float64), causal=False),
     TypeError, "x has dtype torch.float64 but the module's weights are torch.float32"),
    ("mha-float64-context", lambda: Attention(C, H)(torch.randn(B, T, C), causal=False,
                                                    context=torch.randn(B, 7, C, dtype=torch.float64)),
     TypeError, "context has dtype torch.float64"),
    ("attention-mixed-dtypes", lambda: attention(*_qkv()[:2], _qkv(dtype=torch.float64)[2]),
     TypeError, "q, k and v must share one floating-point dtype"),
    ("attention-causal-Tq!=Tk", lambda: attention(*_qkv(tq=3, tk=T), is_causal=True),
     ValueError, "is_causal=True needs as many queries as keys (Tq == Tk), got Tq=3, Tk=5"),
    ("padding-mask-float-lengths", lambda: padding_mask(torch.tensor([2.5, 3.0]), T),
     TypeError, "lengths must be an integer tensor of shape (B,), got torch.float32"),
    ("seq2seq-float-pad-mask", lambda: AdditiveAttention(6, 8, 4)(torch.randn(B, 6), torch.randn(B, T, 8),
                                                                  torch.zeros(B, T)),
     TypeError, "keep_mask must be a bool tensor (B, S), True = may attend"),
    # ---- tokenizers ------------------------------------------------------------------------------
    ("char-decode-negative-id", lambda: CharTokenizer("abc").decode([-1]),
     ValueError, "ids must be in [0, 3), got -1"),
    ("char-decode-float-id", lambda: CharTokenizer("abc").decode([1.7]),
     TypeError, "token ids must be integers, got 1.7"),
    ("bpe-decode-float-id", lambda: BPETokenizer().decode([97.0]),
     TypeError, "token ids must be integers, got 97.0"),
    # ---- KV cache --------------------------------------------------------------------------------
    ("kvcache-advance-negative", lambda: _cache_advance(-3),
     ValueError, "advance(n) needs an int n >= 0 (tokens just written), got -3"),
    ("kvcache-advance-past-max-len", lambda: _cache_advance(5),
     ValueError, "cannot advance past context_len=4"),
    ("kvcache-update-bad-layer", _cache_update_bad_layer,
     IndexError, "layer must be an int in [0, 2) (the cache holds 2 layers), got 2"),
    ("kvcache-update-wrong-shape", _cache_update_wrong_shape,
     ValueError, "k should have shape (B, G, Tq, D) = (2, 3, Tq, 4) to fit this cache, got (3, 3, 1, 4)"),
    ("kvcache-zero-max-len", lambda: KVCache(1, B, H, 0, 4),
     ValueError, "context_len must be a positive int, got 0"),
    ("gpt-cache-wrong-batch", _gpt_with_wrong_batch_cache,
     ValueError, "make it with model.new_cache(2)"),
    # ---- GPT config, recipe and forward ---------------------------------------------------------
    ("gptconfig-dropout-2", lambda: GPTConfig(vocab_size=V, dropout=2.0),
     ValueError, "dropout must lie in [0, 1), got 2.0"),
    ("gptconfig-d_ff-0", lambda: GPTConfig(vocab_size=V, d_ff=0),
     ValueError, "d_ff must be a positive int or None (4 * d_model), got 0"),
    ("gptconfig-n_kv_heads-not-divisor", lambda: GPTConfig(vocab_size=V, n_heads=4, n_kv_heads=3),
     ValueError, "n_kv_heads must be None or a positive divisor of n_heads=4"),
    ("gptrecipe-negative-lr", lambda: GPTRecipe("r", lr=-1),
     ValueError, "lr must be > 0, got -1"),
    ("gptrecipe-min_lr-above-lr", lambda: GPTRecipe("r", lr=1e-3, min_lr=1e-2),
     ValueError, "min_lr must lie in [0, lr=0.001], got 0.01"),
    ("gptrecipe-zero-batch", lambda: GPTRecipe("r", batch_size=0),
     ValueError, "batch_size must be a positive int, got 0"),
    ("gpt-forward-float-ids", lambda: _gpt()(torch.zeros(B, 3)),
     TypeError, "idx must be an integer tensor of token ids (torch.long), got torch.float32"),
    ("gpt-forward-out-of-vocab", lambda: _gpt()(torch.full((B, 3), V)),
     ValueError, "idx must lie in [0, 11), got values from 11 to 11"),
    # ---- generate ------------------------------------------------------------------------------
    ("generate-negative-temperature", lambda: generate(_gpt(), torch.zeros(1, 2, dtype=torch.long), 3, temperature=-1),
     ValueError, "temperature must be a number >= 0, got -1"),
    ("generate-zero-new-tokens", lambda: generate(_gpt(), torch.zeros(1, 2, dtype=torch.long), 0),
     ValueError, "max_new_tokens must be a positive int, got 0"),
    ("generate-fractional-new-tokens", lambda: generate(_gpt(), torch.zeros(1, 2, dtype=torch.long), 2.5),
     ValueError, "max_new_tokens must be a positive int, got 2.5"),
    ("generate-float-prompt", lambda: generate(_gpt(), torch.zeros(1, 2), 3),
     TypeError, "idx must hold integer ids (torch.long), got dtype torch.float32"),
    ("generate-out-of-vocab-prompt", lambda: generate(_gpt(), torch.tensor([[0, V + 4]]), 3),
     ValueError, "idx must lie in [0, 11), got values from 0 to 15"),
    ("generate-top-p-zero", lambda: generate(_gpt(), torch.zeros(1, 2, dtype=torch.long), 3, top_p=0.0),
     ValueError, "top_p must lie in (0, 1] or be None, got 0.0"),
    # ---- n-gram statistics -----------------------------------------------------------------------
    ("ngram_bits-val-shorter-than-n", lambda: ngram.ngram_bits("abcabc", "ab", 4, 3),
     ValueError, "val must hold at least n = 4 tokens to score one 4-gram, got 2"),
    ("nll_bits-one-token", lambda: ngram.nll_bits(torch.zeros(3, 3), torch.tensor([1])),
     ValueError, "ids should be a 1-D tensor with at least 2 tokens (one transition), got (1,)"),
    ("nll_bits-negative-id", lambda: ngram.nll_bits(torch.zeros(3, 3), torch.tensor([1, -1, 2])),
     ValueError, "ids must lie in [0, 3), got values from -1 to 2"),
    ("sample_bigram-negative-start", lambda: ngram.sample_bigram(torch.zeros(3, 3), -1, 4),
     ValueError, "start must be a token id in [0, 3), got -1"),
    ("kneser_ney-discount-one", lambda: ngram.kneser_ney(torch.tensor([1, 2, 1]), 3, 2, discount=1.0),
     ValueError, "discount must lie in [0, 1), got 1.0"),
    ("kneser_ney-out-of-vocab", lambda: ngram.kneser_ney(torch.tensor([1, 2, 3]), 3, 2),
     ValueError, "ids must lie in [0, 3), got values from 1 to 3"),
    ("kneser_ney-context-too-short", lambda: ngram.kneser_ney(torch.tensor([1, 2, 1]), 3, 3)(
        torch.tensor([[1]]), torch.tensor([2])), ValueError, "context should have shape (1, 2), got (1, 1)"),
]


@pytest.mark.parametrize("call, exc, fragment", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_refused_with_a_clear_message(call, exc, fragment):
    with pytest.raises(exc) as info:
        call()
    assert type(info.value) is exc, f"expected {exc.__name__}, got {type(info.value).__name__}: {info.value}"
    assert fragment in str(info.value), f"message lacks {fragment!r}: {info.value}"


def test_case_ids_are_unique():
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids))


def test_valid_neighbours_of_the_bad_cases_still_work():
    """The checks refuse only what they should: the nearest valid calls go through unchanged."""
    x = torch.randn(B, T, C)
    Attention(C, H)(torch.randn(1, 1, C), causal=False, mask=torch.ones(1, 1, dtype=torch.bool))  # B == Tq == 1
    Attention(C, H)(x, causal=False, mask=torch.ones(T, T, dtype=torch.bool).tril())  # (Tq, Tk), B != Tq
    _block()(torch.randn(T, T, C), mask=_square_batch_mask()[:, None, None, :])  # (B, 1, 1, T)
    _block()(x, mask=padding_mask(torch.tensor([3, T]), T))
    assert CharTokenizer("abc").decode(torch.tensor([2, 0])) == "ca"  # integer tensor elements are ids
    cache = KVCache(1, B, H, 4, 4)
    cache.advance(0)
    cache.advance(4)
    assert cache.length == 4
    assert GPTConfig(vocab_size=V, n_heads=4, n_kv_heads=2, d_ff=7, dropout=0.0).d_head == 32
    assert ngram.ngram_bits("abcabc", "abca", 4, 3) > 0
    assert ngram.nll_bits(torch.zeros(3, 3), torch.tensor([1, 2])) == 0.0
    assert ngram.kneser_ney(torch.tensor([1, 2, 1]), 3, 2, discount=0.99)(torch.tensor([[1]]), torch.tensor([2])) < 0


# ---- exercise checkers under `python -O` ------------------------------------------------------------
_WRONG_ANSWERS = textwrap.dedent("""
    import sys
    import torch
    import torch.nn.functional as F
    from book.chapters.ch04 import check_attention
    from book.chapters.ch07 import check_top_p
    from book.chapters.ch07 import check_kv_cache_bytes
    from book.chapters.ch06 import check_multi_head, check_rms_norm
    from book.chapters.ch01 import check_jelinek_mercer, check_ngram_log_prob
    from book.objectives import mask_tokens
    from book.chapters.ch09 import check_learned_plateau, check_mask_tokens
    from book.chapters.ch05 import check_rotate_half, check_shift_matrix
    from book.chapters.ch02 import check_lstm_step
    from book.chapters.ch03 import check_general_score
    from book.chapters.ch01 import check_bits_per_char
    from book.chapters.ch08 import check_behind_buckets, check_cross_attention, check_transformer_params

    if not sys.flags.optimize:
        sys.exit("not running under -O")
    wrong = {   # right shapes, wrong values: only a value check can catch them
        "check_attention": (check_attention, lambda q, k, v, m: 2 * F.scaled_dot_product_attention(q, k, v, m)),
        "check_multi_head": (check_multi_head, lambda x, mha: 2 * mha(x, causal=False)),
        "check_rms_norm": (check_rms_norm, lambda x, w, eps: F.layer_norm(x, (x.shape[-1],), w, None, eps)),
        "check_top_p": (check_top_p, lambda logits, p: logits),
        "check_kv_cache_bytes": (check_kv_cache_bytes, lambda *args: 0),
        "check_ngram_log_prob": (check_ngram_log_prob, lambda *args: 0.0),
        "check_jelinek_mercer": (check_jelinek_mercer, lambda tables, context, token, V, lam: 1 / V),  # no counts
        "check_shift_matrix": (check_shift_matrix, lambda k, d: torch.eye(d)),
        "check_rotate_half": (check_rotate_half, lambda x, offset: x),            # no rotation at all
        "check_lstm_step": (check_lstm_step, lambda x, h, c, *weights: (h, c)),
        "check_general_score": (check_general_score, lambda s, H, W: 2 * torch.einsum("bd,de,bse->bs", s, W, H)),
        "check_bits_per_char": (check_bits_per_char, lambda p: -p.log().mean()),
        "check_transformer_params": (check_transformer_params, lambda v, c, f, n: v * c),
        "check_mask_tokens": (check_mask_tokens,   # every chosen position becomes [MASK]: no 10 % / 10 %
                              lambda ids, vocab, g: mask_tokens(ids, vocab, mask_frac=0.99, random_frac=0.0,
                                                                generator=g)[:2]),
        "check_learned_plateau": (check_learned_plateau, lambda positions: [3.3] * 10),   # too short to show a plateau
        "check_cross_attention": (check_cross_attention,
                                  lambda y, m, a, k: a(y, m, causal=False, need_weights=True)[1]),   # no padding mask
        "check_behind_buckets": (check_behind_buckets,   # the seeds' means compared, not every seed against every seed
                                 lambda rec, s: [b for b in rec["attention RNN", s] if sum(rec["attention RNN", s][b])
                                                 > sum(rec["Transformer", s][b])]),
    }
    accepted = []
    for name, (check, answer) in wrong.items():
        try:
            check(answer)
        except AssertionError as e:
            print(f"rejected {name}: {e}")
        else:
            accepted.append(name)
    if accepted:
        sys.exit(f"accepted wrong answers under -O: {accepted}")
    print(f"all {len(wrong)} checkers rejected their wrong answer")
    print("checkers: " + " ".join(sorted(wrong)))
""")


def test_checkers_reject_wrong_answers_under_python_O():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-O", "-c", _WRONG_ANSWERS], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    import importlib
    import inspect
    import pkgutil

    import book
    every = set()
    for info in pkgutil.walk_packages(book.__path__, "book."):   # an exercise checker takes the reader's function,
        mod = importlib.import_module(info.name)                  # `fn`, first: a chapter's check_and_glue_... and
        every |= {n for n, f in vars(mod).items() if n.startswith("check_") and callable(f)   # check_shape do not
                  and getattr(f, "__module__", "") == mod.__name__
                  and next(iter(inspect.signature(f).parameters), None) == "fn"}
    listed = res.stdout.split("checkers: ")[1].split()
    assert sorted(set(every) - set(listed)) == [], "an exercise checker has no wrong answer in _WRONG_ANSWERS"
    assert f"all {len(listed)} checkers rejected their wrong answer" in res.stdout
    assert "rejected check_lstm_step: c' differs" in res.stdout
    assert "rejected check_general_score: shape is right but values differ" in res.stdout


def test_no_bare_assert_in_the_package():
    """`python -O` strips `assert`: the package must raise explicitly (checkers raise AssertionError)."""
    found = []
    for path in sorted((ROOT / "book").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        found += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(tree) if isinstance(node, ast.Assert)]
    assert not found, f"bare assert statements (stripped by python -O): {found}"


def test_every_checker_is_exercised_under_O():
    """A new check_* in book/ (the chapter modules hold them) must be added to the -O test above."""
    names = set()
    for path in (ROOT / "book").rglob("*.py"):
        tree = ast.parse(path.read_text())
        names |= {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("check_")
                  and (ast.get_docstring(n) or "").startswith("Self-check")}  # the exercise checkers
    tested = {line.split('"')[1] for line in _WRONG_ANSWERS.splitlines() if line.strip().startswith('"check_')}
    assert names == tested, f"checkers not exercised under -O: {sorted(names - tested)}"
