"""book.pretrain: the three objectives in training, fill-in-the-blank, continuations, writing, SFT."""
import math

import pytest
import torch

from book.bert import BERT, EncoderConfig
from book.gpt import GPT, GPTConfig
from book.objectives import IGNORE, PretrainVocab
from book.pretrain import answer, continuation_bits, fill_blank, pretrain, write
from book.chapters.ch09 import (answer_logp, dpo_loss, finetune, first_char_accuracy, instruction_batch,
                                objective_loss, preference_pairs, preference_tune, word_rate)
from book.transformer import Transformer, TransformerConfig

VOCAB = PretrainVocab(11, n_sentinels=6)
T = 12


def _models():
    torch.manual_seed(0)
    kw = dict(context_len=T, d_model=16, n_heads=2, n_layers=1, positions="rope")
    return {"bert": BERT(EncoderConfig(VOCAB.size, **kw)).eval(), "gpt": GPT(GPTConfig(VOCAB.size, **kw)).eval(),
            "t5": Transformer(TransformerConfig(VOCAB.size, VOCAB.size, **kw, norm="pre", share_embeddings=True,
                                                tie_output=True, pad_id=None)).eval()}


def _windows(B=4, n=T + 1, seed=0):
    return torch.randint(0, VOCAB.n_chars, (B, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("family", ["bert", "gpt", "t5"])
def test_objective_loss_counts_its_positions(family):
    model = _models()[family]
    loss, n = objective_loss(model, family, _windows(), VOCAB, torch.Generator().manual_seed(1))
    assert loss.dim() == 0 and loss.item() > 0
    if family == "gpt":
        assert n == 4 * T                               # every position
    elif family == "t5":
        assert n == 4 * 5                               # span_layout(12): 2 dropped in 1 span: <X0> c c <X1> [EOS]
    else:
        assert 0 <= n <= 4 * T


def test_gpt_loss_fraction_keeps_a_share_of_positions():
    gpt = _models()["gpt"]
    _, n = objective_loss(gpt, "gpt", _windows(64, seed=3), VOCAB, torch.Generator().manual_seed(2), loss_fraction=0.15)
    assert 0.08 * 64 * T < n < 0.22 * 64 * T
    with pytest.raises(ValueError, match="gpt family"):
        objective_loss(_models()["bert"], "bert", _windows(), VOCAB, loss_fraction=0.5)
    with pytest.raises(ValueError, match="loss_fraction"):
        objective_loss(gpt, "gpt", _windows(), VOCAB, loss_fraction=0.0)
    with pytest.raises(ValueError, match="family"):
        objective_loss(gpt, "xlnet", _windows(), VOCAB)


@pytest.mark.parametrize("family", ["bert", "gpt", "t5"])
def test_pretrain_lowers_the_loss_and_records_history(family):
    model = _models()[family]
    data = torch.arange(400) % 7                        # a periodic text: easy to learn
    h = pretrain(model, family, data, VOCAB, steps=60, batch_size=8, context_len=T, lr=1e-2, progress=False,
                 eval_fn=lambda m: 1.0, eval_every=20)
    assert [s for s, _ in h.val] == [20, 40, 60]
    assert h.train_seconds > 0 and h.supervised > 0 and not model.training
    assert sum(h.train_loss[-10:]) / 10 < sum(h.train_loss[:10]) / 10


def test_stop_after_runs_the_first_steps_of_the_same_schedule():
    """stop_after=n gives exactly the model a full run has after its first n steps (same learning rates, windows)."""
    data = torch.arange(400) % 7
    runs = {}
    for stop in (None, 15):
        torch.manual_seed(0)
        model = GPT(GPTConfig(VOCAB.size, context_len=T, d_model=16, n_heads=2, n_layers=1))
        runs[stop] = (model, pretrain(model, "gpt", data, VOCAB, steps=40, batch_size=4, context_len=T,
                                      progress=False, eval_fn=lambda m: 0.0, eval_every=10, stop_after=stop))
    full, part = runs[None][1], runs[15][1]
    assert len(part.train_loss) == 15 and [s for s, _ in part.val] == [10, 15]
    assert part.train_loss == full.train_loss[:15]          # same windows, same learning rates, same losses
    assert part.supervised == 15 * 4 * T
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="stop_after"):
            pretrain(runs[15][0], "gpt", data, VOCAB, steps=40, context_len=T, progress=False, stop_after=bad)


@pytest.mark.parametrize("family", ["bert", "gpt", "t5"])
def test_fill_blank_returns_characters(family):
    out = fill_blank(_models()[family], family, _windows(3, T), 5, VOCAB, candidates=4)
    assert out.shape == (3,) and int(out.max()) < VOCAB.n_chars


def test_gpt_fill_blank_scores_the_whole_window():
    """With every candidate scored, the pick maximises the total log-likelihood of the filled window."""
    gpt = _models()["gpt"]
    w = _windows(2, T, seed=4)
    pick = fill_blank(gpt, "gpt", w, 6, VOCAB, candidates=VOCAB.n_chars)

    def total(row):
        with torch.no_grad():
            lp = gpt(row[None, :-1]).log_softmax(-1)
        return lp[0].gather(-1, row[1:, None]).sum().item()

    for b in range(2):
        scores = []
        for c in range(VOCAB.n_chars):
            row = w[b].clone()
            row[6] = c
            scores.append(total(row))
        assert int(pick[b]) == max(range(VOCAB.n_chars), key=scores.__getitem__)
    with pytest.raises(ValueError, match="pos"):
        fill_blank(gpt, "gpt", w, 0, VOCAB)


def test_continuation_bits():
    m = _models()
    w = _windows(3, T)
    for family in ("gpt", "t5"):
        bits = continuation_bits(m[family], family, w, 8, VOCAB)
        assert 0 < bits < 3 * math.log2(VOCAB.size)
    with pytest.raises(ValueError, match="left-to-right"):
        continuation_bits(m["bert"], "bert", w, 8, VOCAB)
    with pytest.raises(ValueError, match="n_prompt"):
        continuation_bits(m["gpt"], "gpt", w, T, VOCAB)


@pytest.mark.parametrize("family", ["bert", "gpt", "t5"])
def test_write_extends_by_characters_only(family):
    prompt = _windows(1, 5)
    out = write(_models()[family], family, prompt, 20, VOCAB, generator=torch.Generator().manual_seed(0))
    assert out.shape == (1, 25) and torch.equal(out[:, :5], prompt) and int(out.max()) < VOCAB.n_chars
    with pytest.raises(ValueError, match=r"\(1, P\)"):
        write(_models()[family], family, _windows(2, 5), 3, VOCAB)


def test_word_rate():
    assert word_rate("To be, or NOT to be", {"to", "be", "or"}) == pytest.approx(5 / 6)
    assert word_rate("!!!", {"to"}) == 0.0


def test_instruction_batch_puts_the_loss_on_the_answer_only():
    enc = lambda s: [ord(c) - 96 for c in s]
    x, y = instruction_batch([("abc", "de"), ("a", "b")], enc, 0, 8)
    assert x.tolist() == [[1, 2, 3, 4], [1, 0, 0, 0]]
    assert y.tolist() == [[IGNORE, IGNORE, 4, 5], [2, IGNORE, IGNORE, IGNORE]]
    with pytest.raises(ValueError, match="context_len"):
        instruction_batch([("abcdefgh", "ij")], enc, 0, 8)


def test_finetune_learns_a_fixed_answer_and_answer_reads_it():
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(VOCAB.size, context_len=T, d_model=16, n_heads=2, n_layers=1))
    enc = lambda s: [int(c) for c in s]
    dec = lambda ids: "".join(str(i) for i in ids)
    pairs = [("12", "3"), ("45", "3"), ("67", "3")]
    h = finetune(gpt, pairs, enc, 10, steps=80, batch_size=8, lr=3e-2)
    assert len(h.train_loss) == 80 and h.train_loss[-1] < h.train_loss[0]
    assert answer(gpt, ["12", "67"], enc, dec, n_chars=10, max_new=1, stop="9") == ["3", "3"]   # prompts it learned



def test_answer_logp_is_the_sum_of_the_answer_tokens_log_probabilities():
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(VOCAB.size, context_len=T, d_model=16, n_heads=2, n_layers=1)).eval()
    enc = lambda s: [int(c) for c in s]
    with torch.no_grad():
        got = answer_logp(gpt, [("12", "34"), ("5", "6")], enc, 10)
        logp = torch.log_softmax(gpt(torch.tensor([[1, 2, 3]])), -1)[0]
        want = logp[1, 3] + logp[2, 4]                     # "3" after "12", then "4" after "123"
        want2 = torch.log_softmax(gpt(torch.tensor([[5]])), -1)[0, 0, 6]
    torch.testing.assert_close(got, torch.stack([want, want2]))


def test_dpo_loss_is_log2_at_the_reference_and_falls_as_the_policy_prefers_the_chosen():
    z = torch.zeros(4)
    assert dpo_loss(z, z, z, z, beta=0.5).item() == pytest.approx(math.log(2))
    better = dpo_loss(z + 1, z - 1, z, z, beta=0.5)          # the policy moved towards the chosen answer
    worse = dpo_loss(z - 1, z + 1, z, z, beta=0.5)
    assert better.item() < math.log(2) < worse.item()
    # only the change against the reference counts: shifting both the policy's and the reference's chosen
    # log-probabilities by the same amount changes nothing
    assert dpo_loss(z + 3, z, z + 3, z, beta=2.0).item() == pytest.approx(math.log(2))


def test_preference_tuning_raises_the_chosen_answer_over_the_models_own_wrong_one():
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(VOCAB.size, context_len=T, d_model=16, n_heads=2, n_layers=1))
    enc = lambda s: [int(c) for c in s]
    dec = lambda ids: "".join(str(i) for i in ids)
    pairs = [("12", "39"), ("45", "39"), ("67", "39")]        # one-character answers, "9" as the newline
    triples = preference_pairs(gpt, pairs, enc, dec, 10, n_chars=9)
    assert [(p, c) for p, c, _ in triples] == pairs and all(r[0] != "3" and r[1] == "9" for _, _, r in triples)
    margin = lambda m: (answer_logp(m, [(p, c) for p, c, _ in triples], enc, 10)
                        - answer_logp(m, [(p, r) for p, _, r in triples], enc, 10)).mean().item()
    with torch.no_grad():
        before = margin(gpt)
    h = preference_tune(gpt, triples, enc, 10, steps=40, beta=1.0, lr=3e-2, batch_size=8)
    with torch.no_grad():
        after = margin(gpt)
    assert len(h.train_loss) == 40 and h.train_loss[-1] < h.train_loss[0] and after > before + 1
    with torch.no_grad():   # the accuracy is the share of prompts whose likeliest next character is the answer's
        top = [gpt(torch.tensor([enc(p)]))[0, -1, :9].argmax().item() for p, _ in pairs]
    assert first_char_accuracy(gpt, pairs, enc, 10, n_chars=9) == pytest.approx(
        sum(t == 3 for t in top) / len(pairs))
    with pytest.raises(ValueError, match="one-character answers"):
        preference_pairs(gpt, [("12", "349")], enc, dec, 10, n_chars=9)
    with pytest.raises(ValueError, match="beta"):
        preference_tune(gpt, triples, enc, 10, steps=1, beta=0.0)


# ---- RoPE in the one family (positions="rope"), which chapter 9's three models use --------------------------
def test_rope_gpt_cache_equals_full_pass():
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(VOCAB.size, context_len=T, d_model=16, n_heads=2, n_layers=2, positions="rope")).eval()
    assert gpt.pos_emb is None
    ids = _windows(2, 9)
    with torch.no_grad():
        full = gpt(ids)
        cache = gpt.new_cache(2, 9)
        steps = [gpt(ids[:, :4], cache=cache)] + [gpt(ids[:, t:t + 1], cache=cache) for t in range(4, 9)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


def test_rope_encoder_decoder_cache_equals_full_pass_and_positions_matter():
    m = _models()["t5"]
    src, tgt = _windows(2, 7), _windows(2, 6, seed=1)
    with torch.no_grad():
        memory = m.encode(src)
        full = m.decode(tgt, memory)
        cache = m.new_cache(2, 6)
        steps = torch.cat([m.decode(tgt[:, t:t + 1], memory, cache=cache) for t in range(6)], 1)
        swapped = m.encode(src[:, [1, 0, 2, 3, 4, 5, 6]])
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(swapped[:, 2:], memory[:, 2:])     # order reaches every position through RoPE


def test_rope_options_are_checked():
    from book.attention import Attention
    with pytest.raises(ValueError, match="positions"):
        GPTConfig(10, positions="alibi")
    with pytest.raises(ValueError, match="positions"):
        EncoderConfig(10, positions="sinusoidal")
    with pytest.raises(ValueError, match="positions"):
        TransformerConfig(10, 10, positions="learned")
    attn = Attention(8, 2, rope=True)
    with pytest.raises(ValueError, match="cross-attention .* takes no rope"):
        attn(torch.randn(1, 3, 8), torch.randn(1, 4, 8), causal=False)
    bert = _models()["bert"]
    assert bert.pos_emb is None and bert(_windows(2, T)).shape == (2, T, VOCAB.size)


def test_quote_windows_repeat_one_passage():
    from book.pretrain import quote_windows
    data = torch.arange(1000) % 97
    w = quote_windows(data, 16, 40, torch.Generator().manual_seed(0), min_len=5, max_len=12)
    assert w.shape == (16, 41)
    for row in w.tolist():   # some passage of >= 5 tokens occurs twice, without overlap
        found = any(row[i:i + 5] == row[j:j + 5] for i in range(37) for j in range(i + 5, 37))
        assert found
    with pytest.raises(ValueError, match="two passages"):
        quote_windows(data, 2, 20, torch.Generator(), min_len=5, max_len=10)
    h = pretrain(_models()["gpt"], "gpt", data, VOCAB, steps=3, batch_size=2, context_len=T, progress=False,
                 windows_fn=lambda g: quote_windows(data % VOCAB.n_chars, 2, T, g, 2, 4))
    assert len(h.train_loss) == 3


def test_family_configs_are_within_five_percent_and_build():
    from book.pretrain import build, family_configs
    from book.utils import count_params
    for width in (96, 192):                      # the chapter's CPU and GPU sizes
        configs = family_configs(75, 64, width=width)
        with torch.device("meta"):
            sizes = {name: count_params(build(name, cfg)) for name, cfg in configs.items()}
        assert all(abs(n / sizes["GPT"] - 1) <= 0.05 for n in sizes.values()), sizes
        assert configs["T5"].d_model == width * 2 // 3 and configs["T5"].share_embeddings
    assert isinstance(build("T5", family_configs(VOCAB.size, T, width=24, n_heads=2)["T5"]), Transformer)
    with pytest.raises(ValueError, match="BERT"):
        build("ELMo", family_configs(VOCAB.size, T)["GPT"])


def _translator(n_layers=1):
    from book.pretrain import StreamTranslator
    from book.tasks import ToyTranslation
    from book.utils import seed_everything

    task = ToyTranslation()
    n_src, n_tgt = len(task.src_vocab), len(task.tgt_vocab)
    seed_everything(0)
    gpt = GPT(GPTConfig(n_src + n_tgt, 80, d_model=16, n_heads=2, n_layers=n_layers, positions="rope"))
    return task, StreamTranslator(gpt, n_src, n_tgt), n_src


def test_stream_translator_reads_source_then_target_in_one_stream():
    """Each row's logits are the GPT's on that row's own unpadded stream: source ids, then target ids + n_src."""
    task, model, n_src = _translator()
    batch = task.train_batch(3, 3, 12, torch.Generator().manual_seed(1))
    assert (batch.src == 0).any()                                    # some rows are padded
    with torch.no_grad():
        logits = model(batch.src, batch.tgt_in)
        assert logits.shape == (3, batch.tgt_in.shape[1], len(task.tgt_vocab))
        for b in range(3):
            src = batch.src[b][batch.src[b] != 0]
            stream = torch.cat([src, batch.tgt_in[b] + n_src])[None]
            own = model.gpt(stream)[0, len(src):, n_src:]
            torch.testing.assert_close(logits[b], own, atol=1e-5, rtol=1e-5)


def test_stream_translator_learns_the_toy_task_and_decodes_greedily():
    from book.seq2seq import train_seq2seq
    from book.tasks import evaluate_translation

    task, model, _ = _translator(n_layers=2)
    losses = train_seq2seq(model, task, steps=60, batch_size=32, lr=1e-2, max_len=6,
                           generator=torch.Generator().manual_seed(0), progress=False)
    assert losses[-1] < 0.8 * losses[0]
    out = model.greedy(task.make_batch([["cat", "sees", "dog"]]).src, 6)
    assert out.shape[0] == 1 and out.shape[1] <= 6 and int(out.max()) < len(task.tgt_vocab)
    acc = evaluate_translation(lambda s, n: model.greedy(s, n), task.test_sets([(3, 4)], 8))
    assert 0.0 <= acc[(3, 4)][0] <= acc[(3, 4)][1] <= 1.0


def test_stream_translator_rejects_bad_inputs():
    from book.pretrain import StreamTranslator

    task, model, n_src = _translator()
    with pytest.raises(ValueError, match="must hold both vocabularies"):
        StreamTranslator(model.gpt, n_src, 200)
    with pytest.raises(ValueError, match="n_tgt must be a positive int"):
        StreamTranslator(model.gpt, n_src, 0)
    with pytest.raises(ValueError, match="pad_id must be a source id"):
        StreamTranslator(model.gpt, n_src, 5, pad_id=n_src)
    good = torch.tensor([[5, 6, 0]])
    with pytest.raises(ValueError, match="right-padded"):
        model(torch.tensor([[5, 0, 6]]), torch.tensor([[1, 4]]))
    with pytest.raises(ValueError, match="src"):
        model(torch.tensor([[5, 99]]), torch.tensor([[1, 4]]))
    with pytest.raises(ValueError, match="same batch size"):
        model(good, torch.tensor([[1, 4], [1, 4]]))
    with pytest.raises(ValueError, match="tgt_in must be 2-D"):
        model(good, torch.tensor([1, 4]))
    with pytest.raises(ValueError, match="max_len must be a positive int"):
        model.greedy(good, 0)


def test_induction_scores_find_the_previous_token_and_the_induction_pattern():
    from book.chapters.ch09 import induction_scores

    T, first, second, length = 12, 1, 6, 5
    prev = torch.zeros(2, 3, T, T)                                   # (B, H, T, T): every row on t - 1
    prev[..., 0, 0] = 1
    prev[..., torch.arange(1, T), torch.arange(T - 1)] = 1
    ind = torch.full((2, 3, T, T), 1.0 / T)                          # uniform, except the second copy
    for k in range(length - 1):
        ind[..., second + k, :] = 0
        ind[..., second + k, first + k + 1] = 1
    p, i = induction_scores([prev, ind], first, second, length)     # layer 1: previous token, layer 2: induction
    assert p.shape == i.shape == (2, 3)
    torch.testing.assert_close(p[0], torch.ones(3))
    torch.testing.assert_close(i[1], torch.ones(3))
    assert float(i[0].max()) == 0.0 and float(p[1].max()) < 0.5
    p2, i2 = induction_scores(torch.stack([prev, ind]), first, second, length)   # stacked (L, B, H, T, T)
    assert torch.equal(p, p2) and torch.equal(i, i2)


@pytest.mark.parametrize("first, second, length, match", [
    (0, 3, 5, "two copies inside the window"), (0, 8, 5, "two copies inside the window"),
    (0, 6, 1, "length >= 2"), (-1, 6, 3, "first must be an int >= 0")])
def test_induction_scores_reject_bad_positions(first, second, length, match):
    from book.chapters.ch09 import induction_scores

    with pytest.raises(ValueError, match=match):
        induction_scores(torch.zeros(1, 1, 1, 12, 12), first, second, length)
    with pytest.raises(ValueError, match="5-D"):
        induction_scores(torch.zeros(1, 12, 12), 0, 6, 3)
