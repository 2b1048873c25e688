"""The reliability review's probes of the public API (shared/reviews/reliability.md, section 1 and its appendix), one
test each: every probe that gave a silent wrong result, a hang or a raw error now gets a clear error (the message names
the argument) or the correct value. Also: a diverging run stops naming the step (`Diverged`), ids are checked once at
each model's entrance, and a training step of `fit` reads the device once (the loss)."""
from __future__ import annotations

import math
import os
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from book import ngram
from book.chapters import ch01
from book.results import seed_span
from book.chapters.ch09 import seed_verdict
from book.chapters.ch10 import range_verdict

V = 10


def _gpt(**kw):
    from book.gpt import GPT, GPTConfig
    torch.manual_seed(0)
    return GPT(GPTConfig(V, 8, 16, 2, 1, **kw))


def _data(n=500, seed=0):
    return torch.randint(0, V, (n,), generator=torch.Generator().manual_seed(seed))


# ---- F1: race() with too few `every` entries used to loop forever ---------------------------------------------------

def _recipe(name):
    from book.train import GPTRecipe
    return GPTRecipe(name, n_layers=1, n_heads=2, d_model=16, context_len=8, batch_size=2, steps=4, warmup=1)


@pytest.mark.parametrize("every", [[2], 2, [2, 0], [2, 2.5]])
def test_race_refuses_an_every_that_does_not_match_the_recipes(every):
    from book.train import race
    with pytest.raises(ValueError, match="every must"):
        race([_recipe("a"), _recipe("b")], V, _data(), _data(), 1.0, every=every, eval_windows=64)


def test_race_refuses_zero_eval_windows():
    from book.train import race
    with pytest.raises(ValueError, match="eval_windows must be a positive int"):
        race([_recipe("a")], V, _data(), _data(), 1.0, every=[2], eval_windows=0)


# ---- F2: the n-gram functions on tensors ---------------------------------------------------------------------------

def test_ngram_functions_give_the_same_numbers_on_tensors_and_lists():
    train, val = [0, 1, 2, 3, 4] * 40, [0, 1, 2, 3, 4, 0, 1]
    tt, tv = torch.tensor(train), torch.tensor(val)
    assert ngram.ngram_bits(tt, tv, 3, 5) == ngram.ngram_bits(train, val, 3, 5) < 0.1
    assert ch01.ngram_stats(tt, tv, 3) == ch01.ngram_stats(train, val, 3)
    assert ngram.ngram_counts(tt, 2) == ngram.ngram_counts(train, 2)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=3, max_size=40), st.lists(st.integers(0, 4), min_size=3, max_size=12),
       st.integers(1, 3))
def test_ngram_bits_on_tensors_equals_lists(train, val, n):
    assert ngram.ngram_bits(torch.tensor(train), torch.tensor(val), n, 5) == ngram.ngram_bits(train, val, n, 5)


@pytest.mark.parametrize("call, exc, fragment", [
    (lambda: ch01.ngram_stats([], [0, 1], 2), ValueError, "train must hold at least one token"),
    (lambda: ngram.ngram_bits([0, 1, 2], [0, 1, 2], 2, 1), ValueError, "vocab_size must count every symbol"),
    (lambda: ngram.ngram_counts(torch.zeros(2, 3, dtype=torch.long), 2), ValueError, "ids must be 1-D"),
    (lambda: ngram.ngram_counts(torch.rand(5), 2), TypeError, "ids must hold integer token ids"),
    (lambda: ngram.ngram_counts(None, 2), TypeError, "ids must be a sequence of token ids"),
])
def test_ngram_nonsense_is_refused(call, exc, fragment):
    with pytest.raises(exc, match=fragment):
        call()


# ---- F3: seed verdicts and spans ----------------------------------------------------------------------------------

def test_seed_verdict_never_calls_a_tie_a_win():
    tied = seed_verdict("BERT", [0.5, 0.5], "GPT", [0.5, 0.5])
    assert tied == "BERT and GPT are not separated (tied in 2 of 2 seeds)"
    assert "not separated" in seed_verdict("BERT", [0.5, 0.4], "GPT", [0.5, 0.5])
    assert seed_verdict("BERT", [0.6, 0.7], "GPT", [0.5, 0.5]) == "BERT scores higher than GPT in every seed"
    assert seed_verdict("BERT", [0.4, 0.3], "GPT", [0.5, 0.5]) == "GPT scores higher than BERT in every seed"
    assert seed_verdict("a", [0.6, 0.4], "b", [0.5, 0.5]) == "a and b are not separated (the seeds disagree)"


@pytest.mark.parametrize("call, fragment", [
    (lambda: seed_verdict("BERT", [float("nan")], "GPT", [0.3]), "va holds nan at seed 0"),
    (lambda: seed_verdict("BERT", [0.3], "GPT", [float("inf")]), "vb holds inf at seed 0"),
    (lambda: seed_span([0.2, float("nan")]), "values holds nan at seed 1"),
    (lambda: range_verdict([float("nan")], [1]), "new holds nan at seed 0"),
])
def test_a_diverged_seed_is_not_hidden(call, fragment):
    with pytest.raises(ValueError, match=fragment):
        call()


def test_seed_span_of_strings_names_the_argument():
    with pytest.raises(TypeError, match="values must hold numbers"):
        seed_span(["0.2", "0.3"])


_seeds = st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=5)


@settings(max_examples=100, deadline=None)
@given(_seeds, st.data())
def test_seed_verdict_is_symmetric_and_calls_a_win_only_when_every_seed_agrees(va, data):
    vb = data.draw(st.lists(st.sampled_from(va + [0.0, 0.5, 1.0]), min_size=len(va), max_size=len(va)))
    one, other = seed_verdict("a", va, "b", vb), seed_verdict("b", vb, "a", va)
    if one.startswith("a scores"):
        assert all(x > y for x, y in zip(va, vb)) and other == one
    elif one.startswith("b scores"):
        assert all(y > x for x, y in zip(va, vb)) and other == one
    else:
        assert "not separated" in one and "not separated" in other


# ---- F4: divergence, another model's optimizer, GPTRecipe(lr=inf) --------------------------------------------------

def _diverging(**kw):
    from book.train import train_lm
    return train_lm(_gpt(), _data(), _data(), steps=30, batch_size=4, context_len=4, lr=1e6, progress=False, **kw)


def test_a_diverging_run_raises_naming_the_step_with_its_partial_history():
    from book.optim import Diverged
    with pytest.raises(Diverged, match=r"training diverged at step \d+: the loss is nan") as info:
        _diverging()
    e = info.value
    assert isinstance(e, FloatingPointError) and e.history is not None and e.history.diverged == e.step
    assert len(e.history.train_loss) == e.step + 1 == e.history.steps and math.isnan(e.history.train_loss[-1])
    assert all(math.isfinite(v) for v in e.history.train_loss[:-1])


def test_on_nonfinite_stop_returns_the_history_marked_diverged_and_continue_trains_on():
    stopped = _diverging(on_nonfinite="stop")
    assert stopped.diverged is not None and len(stopped.train_loss) == stopped.diverged + 1 == stopped.steps
    assert math.isnan(stopped.final_val)          # the diverged model is still evaluated once, as before
    kept = _diverging(on_nonfinite="continue")   # the behaviour before the check: every step runs
    assert kept.diverged is None and len(kept.train_loss) == 30 and math.isnan(kept.train_loss[-1])
    assert kept.train_loss[:stopped.diverged + 1][:-1] == stopped.train_loss[:-1]


def test_the_check_leaves_a_healthy_run_unchanged():
    from book.train import train_lm
    runs = [train_lm(_gpt(), _data(), _data(), steps=8, batch_size=4, context_len=4, lr=1e-2, progress=False,
                     on_nonfinite=how) for how in ("raise", "continue")]
    assert runs[0].train_loss == runs[1].train_loss and runs[0].final_val == runs[1].final_val
    assert runs[0].diverged is None


def test_train_step_raises_diverged_on_a_nan_loss():
    from book.utils import Diverged, train_step
    w = torch.nn.Parameter(torch.ones(2))
    with pytest.raises(Diverged, match="the loss is nan"):
        train_step(torch.optim.SGD([w], lr=0.1), (w * float("nan")).sum())


def test_fit_refuses_an_optimizer_of_another_model():
    from book.optim import build_optimizer, fit
    m, other = _gpt(), _gpt()
    x = torch.randint(0, V, (2, 5))
    with pytest.raises(ValueError, match="optimizer holds a parameter .* not one of GPT's"):
        fit(m, lambda: (x[:, :-1], x[:, 1:]), optimizer=build_optimizer(other, lr=1e-2), steps=5, progress=False)


@pytest.mark.parametrize("kw, fragment", [(dict(lr=float("inf")), "lr must be a finite number"),
                                          (dict(muon_lr=float("inf")), "muon_lr must be a finite number"),
                                          (dict(name=None), "name must be a string")])
def test_gpt_recipe_refuses_nonsense(kw, fragment):
    from book.train import GPTRecipe
    kw = {"name": "r", **kw}
    with pytest.raises(ValueError, match=fragment):
        GPTRecipe(**kw)


def test_fit_refuses_an_unknown_on_nonfinite():
    from book.optim import fit
    with pytest.raises(ValueError, match="on_nonfinite must be one of"):
        fit(_gpt(), [], optimizer=torch.optim.SGD(_gpt().parameters(), lr=1), steps=1, on_nonfinite="ignore")


# ---- F5: count_calls ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op, fragment", [("mmm", "torch.ops.aten has no 'mmm'"),
                                          ("matmul", "'matmul' is a composite operation"),
                                          ("linear", "'linear' is a composite operation")])
def test_count_calls_refuses_names_it_would_count_as_zero(op, fragment):
    from book.timing import count_calls
    a = torch.randn(3, 3)
    with pytest.raises(ValueError, match=fragment):
        count_calls(lambda: a @ a, op)
    assert count_calls(lambda: a @ a, "mm") == 1


# ---- F6: NaN without an error ---------------------------------------------------------------------------------------

def test_bigram_log_probs_refuses_zero_rows_without_smoothing_and_negative_counts():
    counts = ngram.bigram_counts(torch.tensor([0, 1, 0, 1, 2]), 3)
    with pytest.raises(ValueError, match=r"smoothing=0.*tokens \[2\] are never followed"):
        ngram.bigram_log_probs(counts, smoothing=0.0)
    assert torch.isfinite(ngram.bigram_log_probs(counts)).all()
    with pytest.raises(ValueError, match="counts must be >= 0"):
        ngram.bigram_log_probs(-counts)
    with pytest.raises(ValueError, match="counts must be 2-D"):
        ngram.bigram_log_probs(counts[0])


@pytest.mark.parametrize("attention", ["additive", "multiplicative"])
def test_rnn_attention_refuses_a_row_that_keeps_no_key(attention):
    from book.seq2seq import AdditiveAttention, MultiplicativeAttention
    attn = AdditiveAttention(4, 6, 5) if attention == "additive" else MultiplicativeAttention(4, 6)
    keep = torch.tensor([[True, False, True], [False, False, False]])
    with pytest.raises(ValueError, match="keep_mask blocks every key of some row"):
        attn(torch.randn(2, 4), torch.randn(2, 3, 6), keep)
    _, w = attn(torch.randn(2, 4), torch.randn(2, 3, 6), keep | torch.tensor([[False, True, False]]))
    assert torch.isfinite(w).all()


def test_nll_bits_refuses_probabilities_read_as_logs():
    probs = torch.full((3, 3), 1 / 3)
    with pytest.raises(ValueError, match="probabilities instead of their logs"):
        ngram.nll_bits(probs, torch.tensor([0, 1, 2]))
    assert ngram.nll_bits(probs.log(), torch.tensor([0, 1, 2])) == pytest.approx(math.log2(3))


# ---- F7: tiny temperatures and non-finite logits ----------------------------------------------------------------

def test_a_tiny_temperature_is_greedy():
    from book.generate import generate, next_token_probs
    logits = torch.tensor([[0.1, 2.0, -1.0]])
    assert torch.equal(next_token_probs(logits, 1e-40), torch.tensor([[0.0, 1.0, 0.0]]))
    prompt = torch.zeros(1, 3, dtype=torch.long)
    assert torch.equal(generate(_gpt(), prompt, 3, temperature=1e-40), generate(_gpt(), prompt, 3, temperature=0))


@pytest.mark.parametrize("logits", [torch.tensor([[float("nan"), 0.0]]), torch.full((1, 2), float("-inf"))])
def test_sampling_from_no_distribution_says_so(logits):
    from book.generate import sample_next
    with pytest.raises(ValueError, match="cannot sample: the logits give no probability distribution"):
        sample_next(logits)


# ---- the "accepts nonsense" probes ---------------------------------------------------------------------------------

def _nonsense():
    from book.data import get_batch, shakespeare_split
    from book.chapters.ch06 import block_params
    from book.gpt import GPTConfig
    from book.kv_cache import kv_cache_bytes
    from book.layers import swiglu_hidden
    from book.optim import warmup_cosine
    from book.positional import LearnedPositionalEmbedding, pair_frequencies, sinusoidal_table
    from book.tasks import sequence_accuracy
    from book.tokenizers import CharTokenizer
    from book.train import leaderboard_row
    from book.chapters.ch09 import output_dependence
    return [
        ("block_params(0)", lambda: block_params(0), ValueError, "d_model must be a positive int, got 0"),
        ("block_params(-4)", lambda: block_params(-4), ValueError, "d_model must be a positive int, got -4"),
        ("kv_cache_bytes(-2 layers)", lambda: kv_cache_bytes(-2, 4, 8, 64), ValueError, "n_layers must be a positive"),
        ("kv_cache_bytes(bytes 0)", lambda: kv_cache_bytes(2, 4, 8, 64, 1, 0), ValueError, "bytes_per_value must be"),
        ("swiglu_hidden(0)", lambda: swiglu_hidden(0), ValueError, "d_model must be a positive int"),
        ("swiglu_hidden(multiple=0)", lambda: swiglu_hidden(8, 0), ValueError, "multiple must be a positive int"),
        ("GPTConfig(bias='yes')", lambda: GPTConfig(V, bias="yes"), ValueError, "bias must be True or False"),
        ("decode([True])", lambda: CharTokenizer("ab").decode([True]), TypeError, "token ids must be integers"),
        ("sinusoidal_table(T=2.5)", lambda: sinusoidal_table(2.5, 8), ValueError, "T must be >= 0 (an int), got 2.5"),
        ("LearnedPositionalEmbedding(T=True)", lambda: LearnedPositionalEmbedding(8, 4)(True), ValueError,
         "T must be >= 0 (an int), got True"),
        ("pair_frequencies(base=nan)", lambda: pair_frequencies(4, float("nan")), ValueError, "base must be > 1"),
        ("pair_frequencies(base=inf)", lambda: pair_frequencies(4, float("inf")), ValueError, "base must be > 1"),
        ("get_batch(float data)", lambda: get_batch(torch.rand(50), 2, 4), TypeError, "data must hold integer"),
        ("shakespeare_split('')", lambda: shakespeare_split(""), ValueError, "text is empty"),
        ("shakespeare_split(bytes)", lambda: shakespeare_split(b"abcdefghij"), TypeError, "text must be a str"),
        ("shakespeare_split(train_frac='0.9')", lambda: shakespeare_split("abc", "0.9"), ValueError,
         "train_frac must be a number"),
        ("warmup_cosine(lr_min > lr_max)", lambda: warmup_cosine(5, 10, 2, 0.1, 1.0), ValueError,
         "lr_min must be <= lr_max"),
        ("warmup_cosine(step=-1)", lambda: warmup_cosine(-1, 10, 2, 1.0, 0.1), ValueError, "step must be >= 0"),
        ("leaderboard_row(params=-5)", lambda: leaderboard_row("x", 1, 2.0, -5, 1.0), ValueError,
         "params must be a finite number >= 0, got -5"),
        ("leaderboard_row(train_s=-1)", lambda: leaderboard_row("x", 1, 2.0, 5, -1.0), ValueError, "train_s must be"),
        ("leaderboard_row(chapter='seven')", lambda: leaderboard_row("x", "seven", 2.0, 5, 1.0), ValueError,
         "chapter must be a finite number >= 0, got 'seven'"),
        ("output_dependence(vocab_size=1)", lambda: output_dependence(lambda ids: ids[..., None].float(), 3, 1),
         ValueError, "vocab_size must be >= 2"),
        ("sequence_accuracy(empty batch)", lambda: sequence_accuracy(torch.zeros(0, 3, dtype=torch.long),
                                                                    torch.zeros(0, 3, dtype=torch.long)),
         ValueError, "target holds no sequence"),
        ("GPT targets -100", lambda: _gpt()(torch.zeros(1, 3, dtype=torch.long), torch.full((1, 3), -100)),
         ValueError, "targets must lie in [0, 10), got values from -100 to -100"),
        ("GPT targets out of range", lambda: _gpt()(torch.zeros(1, 3, dtype=torch.long), torch.full((1, 3), V)),
         ValueError, "targets must lie in [0, 10)"),
        ("GPT targets float", lambda: _gpt()(torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 3)),
         TypeError, "targets must hold integer ids"),
    ]


@pytest.mark.parametrize("case", _nonsense(), ids=lambda c: c[0])
def test_nonsense_is_refused_with_a_message_naming_the_argument(case):
    _, call, exc, fragment = case
    with pytest.raises(exc) as info:
        call()
    assert fragment in str(info.value), str(info.value)


# ---- the results readers on corrupt files ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, content, fragment", [
    ("ragged", "model,chapter,phase\nA,1\nB,2,final\n", "row 1: has 2 fields where the header has 3"),
    ("extra", "model,chapter\nA,1,3\n", "row 1: has 3 fields where the header has 2"),
    ("empty", "", "is empty"),
    ("garbage", b"\xff\xfe\x00junk", "is not a UTF-8 CSV table"),
])
def test_read_rows_refuses_a_corrupt_table(tmp_path, name, content, fragment):
    from book.results import read_rows
    path = tmp_path / f"{name}.csv"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ValueError, match=fragment):
        read_rows(name, tmp_path)


def test_read_rows_reads_a_header_only_table_as_no_rows(tmp_path):
    from book.results import read_rows
    (tmp_path / "t.csv").write_text("a,b\n")
    assert read_rows("t", tmp_path) == []


@pytest.mark.parametrize("content, fragment", [('{"script": "x.py", "ar', "is not valid JSON"),
                                                ("[1, 2, 3]", "must hold a JSON object")])
def test_provenance_refuses_a_corrupt_record(tmp_path, content, fragment):
    from book.results import provenance
    (tmp_path / "t.json").write_text(content)
    with pytest.raises(ValueError, match=fragment):
        provenance("t", tmp_path)


@pytest.mark.parametrize("content, fragment", [('{"ch01": {"leader', "is not valid JSON"),
                                                ("[1, 2]", "must map each chapter")])
def test_leaderboard_bpc_refuses_a_corrupt_record(tmp_path, content, fragment):
    from book.chapters.ch07 import leaderboard_bpc
    path = tmp_path / "runtimes.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=fragment):
        leaderboard_bpc("char LSTM", path)


@pytest.mark.parametrize("row, fragment", [
    (dict(model="A", chapter="1", phase="final", budget_s="60", val_bpc="nan"), "val_bpc and budget_s must be finite"),
    (dict(model="A", chapter="one", phase="final", budget_s="60", val_bpc="2.0"), "an integer chapter"),
    (dict(model="A", chapter="1", phase="final", budget_s=None, val_bpc=None), "an integer chapter"),
])
def test_budget_summary_refuses_bad_rows(row, fragment):
    from book.results import budget_summary
    with pytest.raises(ValueError, match=fragment):
        budget_summary([row])


def test_seed_curves_and_left_plateau_refuse_nonsense():
    from book.results import left_plateau
    from book.chapters.ch09 import seed_curves
    with pytest.raises(ValueError, match="an integer seed and step"):
        seed_curves([dict(family="T5", seed="x", step="1", fill="0.5")], "fill")
    with pytest.raises(ValueError, match="base must be a finite number"):
        left_plateau([(0, 0.5), (1, 0.9)], float("nan"))


# ---- F8 and item 3: ids checked once, at each model's entrance -----------------------------------------------------

def _models():
    from book.attention import OneLayerAttention
    from book.blocks import BlockLM
    from book.positional import CopyBackModel
    from book.rnn import CharRNN
    from book.seq2seq import Seq2SeqConfig, build_seq2seq
    s2s = build_seq2seq(Seq2SeqConfig(V, V, d_emb=4, d_enc=4, d_dec=6, d_att=4))
    ok = torch.ones(2, 4, dtype=torch.long)
    return [
        ("CharRNN", lambda ids: CharRNN(V, 4, 8)(ids), "x"),
        ("BlockLM", lambda ids: BlockLM(V, 8, 16, 1, 2)(ids), "idx"),
        ("OneLayerAttention", lambda ids: OneLayerAttention(V, d=8)(ids), "x"),
        ("CopyBackModel", lambda ids: CopyBackModel(V, "none", 8, 2, 8)(ids), "x"),
        ("BigramLM", lambda ids: ch01.BigramLM(V)(ids), "idx"),
        ("Seq2Seq src", lambda ids: s2s(ids, ok), "src"),
        ("Seq2Seq tgt_in", lambda ids: s2s(ok, ids), "tgt_in"),
        ("Seq2Seq.greedy", lambda ids: s2s.greedy(ids, 3), "src"),
        ("generate on a CharRNN", lambda ids: __import__("book.generate", fromlist=["generate"]).generate(
            CharRNN(V, 4, 8), ids, 2), "idx"),
    ]


@pytest.mark.parametrize("case", _models(), ids=lambda c: c[0])
@pytest.mark.parametrize("bad, exc, fragment", [
    (torch.full((2, 4), V), ValueError, "must lie in [0, 10), got values from 10 to 10"),
    (torch.full((2, 4), -1), ValueError, "must lie in [0, 10), got values from -1 to -1"),
    (torch.zeros(2, 4), TypeError, "must hold integer ids"),
])
def test_every_model_checks_its_token_ids_at_the_entrance(case, bad, exc, fragment):
    _, call, name = case
    with pytest.raises(exc) as info:
        call(bad)
    assert str(info.value).startswith(name) and fragment in str(info.value), str(info.value)


def test_char_rnn_refuses_an_empty_sequence():
    from book.rnn import CharRNN
    with pytest.raises(ValueError, match=r"x should have shape \(B, T\) with T >= 1"):
        CharRNN(V, 4, 8)(torch.zeros(2, 0, dtype=torch.long))


_HOST_READS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__")


@pytest.fixture
def host_reads(monkeypatch):
    """Counts every read of a tensor's value on the host (a device sync on a GPU) made outside torch's own code
    (an optimizer reading its CPU step counter is not a device sync)."""
    torch_dir = os.path.dirname(torch.__file__)
    count = [0]

    def wrap(name):
        original = getattr(torch.Tensor, name)

        def counted(self, *args, **kwargs):
            if not sys._getframe(1).f_code.co_filename.startswith(torch_dir):
                count[0] += 1
            return original(self, *args, **kwargs)
        monkeypatch.setattr(torch.Tensor, name, counted)

    for name in _HOST_READS:
        wrap(name)
    return count


def _syncs_per_step(host_reads, model, batch, loss, steps=6):
    from book.optim import build_optimizer, fit
    marks = []

    def loss_fn(m, b):
        marks.append(host_reads[0])
        return loss(m, b)
    fit(model, batch, loss_fn=loss_fn, optimizer=build_optimizer(model, lr=1e-3), steps=steps, grad_clip=1.0,
        progress=False)
    marks.append(host_reads[0])
    return [b - a for a, b in zip(marks, marks[1:])]


def test_a_training_step_reads_the_device_once_the_loss(host_reads):
    """GPT in fit: the first step checks the batch's ids and targets (one read each) and reads the loss; every later
    step reads only the loss."""
    from book.data import get_batch
    from book.gpt import lm_loss
    gen, data = torch.Generator().manual_seed(0), _data()
    per_step = _syncs_per_step(host_reads, _gpt(), lambda: get_batch(data, 4, 8, gen),
                               lambda m, b: lm_loss(m(b[0]), b[1]))
    assert per_step == [3] + [1] * 5, per_step


def test_an_encoder_decoder_step_reads_the_device_once_after_the_first(host_reads):
    from book.transformer import Transformer, TransformerConfig
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(V, V, context_len=8, d_model=16, n_heads=2, n_layers=2, pad_id=0))
    src, tgt = torch.randint(1, V, (3, 6)), torch.randint(1, V, (3, 5))
    per_step = _syncs_per_step(host_reads, model, lambda: (src, tgt),
                               lambda m, b: torch.nn.functional.cross_entropy(m(b[0], b[1]).flatten(0, 1),
                                                                            b[1].flatten()))
    assert per_step[1:] == [1] * 5, per_step
    assert per_step[0] <= 4, per_step     # src, tgt_in, the padding mask, the loss: not once per layer


def test_a_transformer_forward_checks_once_not_in_every_layer(host_reads):
    from book.transformer import Transformer, TransformerConfig
    model = Transformer(TransformerConfig(V, V, context_len=8, d_model=16, n_heads=2, n_layers=4, pad_id=0))
    src, tgt = torch.randint(1, V, (3, 6)), torch.randint(1, V, (3, 5))
    before = host_reads[0]
    model(src, tgt)
    assert host_reads[0] - before == 3        # src ids, tgt_in ids, the padding mask; was 13 (review F8)


def test_inputs_checked_skips_only_the_value_checks():
    from book.checks import inputs_checked, token_ids
    with inputs_checked():
        token_ids(torch.tensor([99]), 3)                       # the range check reads the device: skipped
        with pytest.raises(TypeError, match="must hold integer ids"):
            token_ids(torch.tensor([0.5]), 3)                  # dtype checks cost nothing: kept
    with pytest.raises(ValueError, match="must lie in"):
        token_ids(torch.tensor([99]), 3)


def test_generate_checks_the_prompt_once(host_reads):
    from book.generate import generate
    model, prompt = _gpt(), torch.zeros(1, 3, dtype=torch.long)
    before = host_reads[0]
    generate(model, prompt, 5, temperature=0)
    assert host_reads[0] - before == 1    # the prompt's range; then no check per generated token


# ---- F9: exercise checkers given an unfinished answer ---------------------------------------------------------------

def _checkers():
    from book.chapters.ch04 import check_attention
    from book.chapters.ch06 import check_multi_head, check_rms_norm
    from book.chapters.ch07 import check_top_p
    from book.chapters.ch09 import check_mask_tokens
    from book.chapters.ch05 import check_shift_matrix
    from book.chapters.ch02 import check_lstm_step
    from book.chapters.ch03 import check_general_score
    from book.chapters.ch08 import check_cross_attention
    return [check_attention, check_top_p, check_multi_head, check_rms_norm, check_general_score,
            check_cross_attention, check_mask_tokens, check_lstm_step, check_shift_matrix]


@pytest.mark.parametrize("checker", _checkers(), ids=lambda f: f.__name__)
def test_a_checker_given_none_hints_at_a_missing_return(checker):
    with pytest.raises(AssertionError, match="returned None: did you forget `return`"):
        checker(lambda *args: None)


@pytest.mark.parametrize("checker", ["check_mask_tokens", "check_lstm_step"])
def test_a_checker_expecting_two_values_says_so(checker):
    from book.chapters.ch09 import check_mask_tokens
    from book.chapters.ch02 import check_lstm_step
    fn = {"check_mask_tokens": check_mask_tokens, "check_lstm_step": check_lstm_step}[checker]
    with pytest.raises(AssertionError, match="should return two values"):
        fn(lambda *args: torch.zeros(2))


# ---- F10 and the other raw errors ------------------------------------------------------------------------------------

def _small_transformer():
    from book.transformer import Transformer, TransformerConfig
    torch.manual_seed(0)
    return Transformer(TransformerConfig(V, V, context_len=8, d_model=16, n_heads=2, n_layers=1, pad_id=0))


def _unclear():
    from book.generate import generate, greedy_translate, next_token_probs, sample_next
    from book.positional import RotaryEmbedding, SinusoidalPositionalEncoding
    from book.rnn import CharRNN
    from book.seq2seq import Seq2SeqConfig, build_seq2seq
    s2s = build_seq2seq(Seq2SeqConfig(V, V, d_emb=4, d_enc=4, d_dec=6, d_att=4))
    src = torch.randint(3, V, (2, 4), generator=torch.Generator().manual_seed(0))
    prompt = torch.zeros(1, 3, dtype=torch.long)
    return [
        ("greedy_translate max_len > context_len",
         lambda: greedy_translate(_small_transformer(), src, 20, eos=V - 1), ValueError,
         "max_len=20 runs past the model's context_len=8"),
        ("greedy_translate bos out of vocab", lambda: greedy_translate(_small_transformer(), src, 4, bos=V),
         ValueError, "bos must be a token id in [0, 10), got 10"),
        ("greedy_translate on a GPT", lambda: greedy_translate(_gpt(), src, 4), TypeError,
         "greedy_translate needs an encoder-decoder"),
        ("SinusoidalPositionalEncoding(context_len=-5)", lambda: SinusoidalPositionalEncoding(8, -5), ValueError,
         "context_len must be >= 0"),
        ("RotaryEmbedding(context_len=-5)", lambda: RotaryEmbedding(8, -5), ValueError, "context_len must be >= 0"),
        ("generate generator=0", lambda: generate(_gpt(), prompt, 2, generator=0), TypeError,
         "generator must be a torch.Generator"),
        ("generate batch 0", lambda: generate(_gpt(), torch.zeros(0, 3, dtype=torch.long), 2), ValueError,
         "idx should have shape (B, T) with B >= 1"),
        ("generate on a model emitting NaN", lambda: generate(_nan_model(), prompt, 2), ValueError,
         "cannot sample"),
        ("next_token_probs temperature='1'", lambda: next_token_probs(torch.zeros(1, 3), "1"), TypeError,
         "temperature must be a number >= 0, got '1'"),
        ("sample_next on 1-D logits", lambda: sample_next(torch.zeros(3)), ValueError, "logits should be a tensor"),
        ("Seq2Seq greedy max_len=2.5", lambda: s2s.greedy(src, 2.5), ValueError, "max_len must be a positive int"),
        ("sample_bigram NaN table", lambda: ngram.sample_bigram(torch.full((3, 3), float("nan")), 0, 2),
         ValueError, "log_probs must be finite log-probabilities"),
        ("sample_bigram all -inf row", lambda: ngram.sample_bigram(torch.full((3, 3), float("-inf")), 0, 2),
         ValueError, "with some mass in every row"),
        ("sample_bigram non-square table", lambda: ngram.sample_bigram(torch.zeros(3, 5), 0, 2), ValueError,
         "log_probs should be a square (V, V) table"),
        ("bigram_log_probs 1-D counts", lambda: ngram.bigram_log_probs(torch.ones(3)), ValueError,
         "counts must be 2-D"),
        ("CharRNN generate out-of-vocab prompt", lambda: generate(CharRNN(V, 4, 8), torch.tensor([[12]]), 5),
         ValueError, "idx must lie in [0, 10)"),
    ]


class _NanLM(torch.nn.Module):
    context_len = None

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, idx):
        return torch.full((*idx.shape, V), float("nan"))


def _nan_model():
    return _NanLM()


@pytest.mark.parametrize("case", _unclear(), ids=lambda c: c[0])
def test_raw_errors_are_said_clearly(case):
    _, call, exc, fragment = case
    with pytest.raises(exc) as info:
        call()
    assert fragment in str(info.value), str(info.value)


def test_the_recorded_tables_still_read():
    """The stricter readers accept every recorded table and provenance."""
    from book.results import RESULTS_DIR, provenance, read_rows
    for path in sorted(RESULTS_DIR.glob("*.csv")):
        read_rows(path.stem)
    for path in sorted(RESULTS_DIR.glob("*.json")):
        assert isinstance(provenance(path.stem), dict)


# ---- the remaining raw errors of the appendix --------------------------------------------------------------------

def _more_unclear():
    from book.attention import scaled_dot_product_attention
    from book.data import load_shakespeare
    from book.generate import top_k_filter, top_p_filter
    from book.optim import build_optimizer
    from book.plots import new_figure, token_labels
    from book.chapters.ch09 import finetune, instruction_batch, letter_copies
    from book.rnn import RNN, CharRNN, RNNCell
    from book.seq2seq import AdditiveAttention, Seq2SeqConfig, build_seq2seq
    from book.tasks import copy_back_batch
    from book.tokenizers import BPETokenizer, CharTokenizer
    from book.utils import claim, seed_everything
    from book.widgets import slider
    import numpy as np
    tok = CharTokenizer("abc")
    q = torch.randn(2, 2, 3, 4)
    return [
        ("CharTokenizer(None)", lambda: CharTokenizer(None), TypeError, "chars must be a str, got NoneType"),
        ("CharTokenizer.from_text(bytes)", lambda: CharTokenizer.from_text(b"abc"), TypeError,
         "chars must be a str, got bytes: decode bytes first"),
        ("encode None", lambda: tok.encode(None), TypeError, "text must be a str, got NoneType"),
        ("decode an int", lambda: tok.decode(1), TypeError, "ids must be a sequence of token ids"),
        ("BPE train text=None", lambda: BPETokenizer.train(None, 260), TypeError, "text must be a str"),
        ("BPE encode None", lambda: BPETokenizer().encode(None), TypeError, "text must be a str"),
        ("BPE merges negative id", lambda: BPETokenizer([(-1, 3)]), ValueError, "uses an id that does not exist"),
        ("BPE merges malformed", lambda: BPETokenizer([(1, 2, 3)]), ValueError, "merges must be pairs of token ids"),
        ("build_optimizer betas=(1.5, 0.9)", lambda: build_optimizer(_gpt(), lr=1e-3, betas=(1.5, 0.9)), ValueError,
         "betas must be two numbers in [0, 1)"),
        ("build_optimizer on no parameters", lambda: build_optimizer(torch.nn.ReLU(), lr=1e-3), ValueError,
         "model has no trainable parameters"),
        ("GPT.optimizer(lr=-1)", lambda: _gpt().optimizer(lr=-1), ValueError, "lr must be a number > 0, got -1"),
        ("seed_everything(2**64)", lambda: seed_everything(2 ** 64), ValueError,
         "seed must be a non-negative int below 2**32"),
        ("seed_everything(True)", lambda: seed_everything(True), ValueError,
         "seed must be a non-negative int below 2**32"),
        ("claim(np.array([True, False]))", lambda: claim(np.array([True, False]), "x"), ValueError,
         "claim expects one truth value, got an array of shape (2,)"),
        ("slider draw returns None", lambda: slider([1, 2], lambda v: None), TypeError,
         "draw(1) must return a matplotlib Figure, got NoneType (did draw forget `return fig`?)"),
        ("new_figure nrows=0", lambda: new_figure(nrows=0), ValueError, "nrows must be a positive int, got 0"),
        ("token_labels None", lambda: token_labels(None), TypeError, "tokens must be a sequence of tokens"),
        ("top_p_filter p=None", lambda: top_p_filter(torch.zeros(1, 3), None), ValueError,
         "p must lie in (0, 1], got None"),
        ("top_k_filter on 0-d logits", lambda: top_k_filter(torch.tensor(1.0), 1), ValueError,
         "logits must be a tensor (..., V) with at least one dimension"),
        ("RNNCell d_in=2.5", lambda: RNNCell(2.5, 4), ValueError, "d_in and d_hidden must be positive ints"),
        ("RNNCell d_in='3'", lambda: RNNCell("3", 4), ValueError, "d_in and d_hidden must be positive ints"),
        ("CharRNN vocab_size=2.5", lambda: CharRNN(2.5), ValueError, "vocab_size, d_emb, d_hidden and n_layers"),
        ("RNN h0 wrong shape", lambda: RNN(3, 4)(torch.randn(2, 5, 3), torch.zeros(2, 7)), ValueError,
         "h0 should have shape (B, H) = (2, 4), got (2, 7)"),
        ("RNN int x", lambda: RNN(3, 4)(torch.ones(2, 5, 3, dtype=torch.long)), TypeError,
         "x must be a floating-point tensor"),
        ("Seq2SeqConfig vocab 0", lambda: build_seq2seq(Seq2SeqConfig(0, 5)), ValueError,
         "src_vocab_size must be a positive int, got 0"),
        ("AdditiveAttention query dim mismatch", lambda: AdditiveAttention(4, 6, 5)(torch.randn(1, 3),
                                                                                   torch.randn(1, 2, 6)),
         ValueError, "this attention takes query (B, Ddec=4)"),
        ("sdpa batch dims mismatch", lambda: scaled_dot_product_attention(q, torch.randn(2, 3, 3, 4),
                                                                          torch.randn(2, 3, 3, 4)),
         ValueError, "q, k and v must share their leading (batch, head) dims"),
        ("ngram_log_prob vocab_size=0", lambda: ngram.ngram_log_prob({}, {}, (), 1, 0), ValueError,
         "vocab_size must be a positive int, got 0"),
        ("copy_back_batch k=2.5", lambda: copy_back_batch(2, 8, 2.5), ValueError, "k must be an int or a"),
        ("instruction_batch empty pairs", lambda: instruction_batch([], list, 0, 8), ValueError,
         "pairs must hold at least one"),
        ("finetune pairs=[]", lambda: finetune(_gpt(), [], list, 0, steps=2), ValueError,
         "pairs must hold at least one"),
        ("letter_copies empty letters", lambda: letter_copies(torch.zeros(0, dtype=torch.long), 2, 2,
                                                              torch.Generator(), 1, 2), ValueError,
         "letters must hold at least one token id"),
        ("load_shakespeare data_dir=int", lambda: load_shakespeare(data_dir=3), TypeError,
         "data_dir must be a folder"),
    ]


@pytest.mark.parametrize("case", _more_unclear(), ids=lambda c: c[0])
def test_more_raw_errors_are_said_clearly(case):
    _, call, exc, fragment = case
    with pytest.raises(exc) as info:
        call()
    assert fragment in str(info.value), str(info.value)


def test_slider_takes_a_generator_of_values():
    from book.plots import new_figure
    from book.widgets import slider
    box = slider((v for v in (1, 2)), lambda v: new_figure()[0])
    assert box._book_label.endswith("2 frames")


def test_top_k_filter_takes_a_numpy_int():
    import numpy as np
    from book.generate import top_k_filter
    logits = torch.tensor([[1.0, 3.0, 2.0]])
    assert torch.equal(top_k_filter(logits, np.int64(2)), top_k_filter(logits, 2))


@pytest.mark.parametrize("content, fragment", [('{"values": {"a": "1"', "is not valid JSON"),
                                                ('{"other": {}}', "must hold an object with a 'values' object")])
def test_recorded_glue_refuses_a_corrupt_record(tmp_path, monkeypatch, content, fragment):
    import book.data as data
    monkeypatch.setattr(data, "GLUE_DIR", tmp_path)
    (tmp_path / "99_x.json").write_text(content)
    with pytest.raises(ValueError, match=fragment):
        data.recorded_glue("99_x")


def test_a_recipe_run_can_record_a_diverged_run():
    from book.optim import Diverged
    from book.train import GPTRecipe, RecipeRun
    recipe = GPTRecipe("hot", n_layers=1, n_heads=2, d_model=16, context_len=8, batch_size=4, steps=40, warmup=0,
                       lr=1e6, grad_clip=1e9)
    run = RecipeRun(recipe, V, _data(), seed=0, on_nonfinite="stop")
    while not run.done:
        run.advance(5)
    assert run.history.diverged is not None and run.step == run.history.diverged + 1 < 40
    with pytest.raises(Diverged, match="training diverged at step"):
        hot = RecipeRun(recipe, V, _data(), seed=0)
        while not hot.done:
            hot.advance(5)
    with pytest.raises(ValueError, match="on_nonfinite must be one of"):
        RecipeRun(recipe, V, _data(), on_nonfinite="ignore")


@pytest.mark.parametrize("family", ["bert", "gpt"])
def test_a_pretraining_step_reads_the_device_once(host_reads, family):
    """pretrain counts the supervised positions as a tensor and reads the sum once, at the end."""
    from book.objectives import PretrainVocab
    from book.pretrain import build, family_configs, pretrain
    vocab = PretrainVocab(V, n_sentinels=4)
    config = family_configs(vocab.size, 8, width=24, n_heads=2)[{"bert": "BERT", "gpt": "GPT"}[family]]
    torch.manual_seed(0)
    model = build({"bert": "BERT", "gpt": "GPT"}[family], config)
    marks = []
    pretrain(model, family, _data(), vocab, steps=6, batch_size=4, context_len=8, progress=False,
             eval_fn=None, windows_fn=lambda g: (marks.append(host_reads[0]), _windows(g))[1])
    per_step = [b - a for a, b in zip(marks, marks[1:])]
    assert per_step[1:] == [1] * (len(per_step) - 1), per_step


def _windows(g):
    return torch.randint(0, V, (4, 9), generator=g)


# ---- the last of the review's probes: huge requests, overflowing scores, two raw messages -----------------------

_HUGE = {   # each asks for terabytes; under a 6 GiB address-space cap the allocator refuses at once
    "causal_mask": ("from book.attention import causal_mask; causal_mask(10**6)", "T=1000000 asks for 1.0 TB"),
    "get_batch": ("import torch; from book.data import get_batch; get_batch(torch.arange(100), 10**12, 8)",
                  "batch_size=1000000000000 asks for"),
    "GPT": ("from book.gpt import GPT, GPTConfig; GPT(GPTConfig(10, 8, 2**20, 1, 1))", "d_model=1048576"),
    "bigram_counts": ("import torch; from book.ngram import bigram_counts; bigram_counts(torch.tensor([0, 1]), 10**6)",
                      "vocab_size=1000000 asks for 8.0 TB"),
    "recall_batch": ("from book.tasks import recall_batch; recall_batch(10**10, 16)", "batch_size=10000000000"),
}


@pytest.mark.parametrize("name", sorted(_HUGE))
def test_a_huge_request_names_its_argument_instead_of_the_allocator(name):
    import subprocess
    code, message = _HUGE[name]
    cap = "import resource; resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30)); "
    res = subprocess.run([sys.executable, "-c", cap + code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("MemoryError:") and message in last and "more than this machine could allocate" in last


def test_allocating_passes_other_errors_through():
    from book.checks import allocating
    with pytest.raises(RuntimeError, match="shape mismatch"):
        with allocating("x", n=3):
            raise RuntimeError("shape mismatch")
    with pytest.raises(MemoryError, match=r"n=3 asks for 8\.0 GB of memory \(a table\)"):
        with allocating("a table", n=3):
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8000000000 bytes.")


def test_overflowing_attention_scores_are_named_not_nan():
    from book.attention import OneLayerAttention, scaled_dot_product_attention
    q = torch.randn(1, 1, 8, 4) * 1e20                   # q @ q^T overflows float32 to inf: inf - inf in the softmax
    with pytest.raises(ValueError, match=r"q @ k\^T overflowed torch.float32 \(largest \|q\| "):
        scaled_dot_product_attention(q, q, q)
    with pytest.raises(ValueError, match="q or k hold NaN or inf"):
        scaled_dot_product_attention(torch.full((1, 2, 4), float("nan")), torch.randn(1, 2, 4), torch.randn(1, 2, 4))
    torch.manual_seed(0)
    model = OneLayerAttention(5, d=8)                     # inside a model no value is read: a NaN run stays NaN
    with torch.no_grad():
        model.q_proj.weight.fill_(float("nan"))
    assert model(torch.zeros(1, 3, dtype=torch.long)).isnan().all()


@pytest.mark.parametrize("call, name", [
    (lambda: __import__("book.generate", fromlist=["generate"]).generate(_gpt(), torch.zeros(1, 1, dtype=torch.long),
                                                                          10**7), "max_new_tokens=10,000,000"),
    (lambda: ngram.sample_bigram(torch.zeros(3, 3), 0, 10**9), "n=1,000,000,000"),
])
def test_a_huge_generation_is_refused_at_once(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_seq2seq_greedy_refuses_a_huge_max_len():
    from book.seq2seq import Seq2SeqConfig, build_seq2seq
    torch.manual_seed(0)
    model = build_seq2seq(Seq2SeqConfig(7, 7))
    with pytest.raises(ValueError, match="max_len=10,000,000 is more than one call writes"):
        model.greedy(torch.ones(1, 4, dtype=torch.long), 10**7)


def test_a_bad_mathtext_label_and_a_bad_device_are_named():
    from book.data import get_batch
    from book.plots import heatmap
    with pytest.raises(ValueError, match=r"x_labels\[0\]='\$\\\\frac\$' is not valid mathtext"):
        heatmap(torch.rand(2, 2), ["$\\frac$", "b"], ["a", "b"])
    heatmap(torch.rand(2, 2), ["$", "b"], ["$x$", "b"])                     # a lone $ is a character; $x$ is fine
    with pytest.raises(ValueError, match="device must be a torch.device or its name"):
        get_batch(torch.arange(100), 2, 8, device="nope")
