"""book.objectives (masked LM, causal LM, span corruption) and book.bert (the encoder). Chapter 9."""
import pytest
import torch
import torch.nn as nn
from torch.testing import assert_close

from book.bert import BERT, EncoderConfig
from book.objectives import IGNORE, PretrainVocab, mask_tokens, span_corrupt, span_layout
from book.chapters.ch09 import check_mask_tokens

VOCAB = PretrainVocab(65)


def _ids(B=400, T=500, seed=0):
    return torch.randint(0, VOCAB.n_chars, (B, T), generator=torch.Generator().manual_seed(seed))


def test_vocab_layout():
    v = PretrainVocab(5, n_sentinels=3)
    assert (v.pad, v.mask, v.bos, v.eos, v.sentinel(0), v.sentinel(2), v.size) == (5, 6, 7, 8, 9, 11, 12)
    assert v.names("abcde")[5:] == ["[PAD]", "[MASK]", "[BOS]", "[EOS]", "<X0>", "<X1>", "<X2>"]
    assert v.is_sentinel(9) and not v.is_sentinel(8) and not v.is_sentinel(12)
    with pytest.raises(ValueError, match="sentinel index must lie in"):
        v.sentinel(3)


def test_masking_proportions_on_200000_positions():
    ids = _ids()
    g = torch.Generator().manual_seed(1)
    inputs, labels, kind = mask_tokens(ids, VOCAB, generator=g)
    chosen = labels != IGNORE
    assert abs(chosen.float().mean().item() - 0.15) < 0.003
    shares = [(kind[chosen] == k).float().mean().item() for k in (1, 2, 3)]
    assert abs(shares[0] - 0.8) < 0.01 and abs(shares[1] - 0.1) < 0.01 and abs(shares[2] - 0.1) < 0.01, shares
    assert torch.equal(labels[chosen], ids[chosen])                      # the label is the original token
    assert torch.equal(inputs[~chosen], ids[~chosen])                    # the rest is untouched
    assert (inputs[kind == 1] == VOCAB.mask).all()
    assert torch.equal(inputs[kind == 3], ids[kind == 3])
    assert (inputs[kind == 2] < VOCAB.n_chars).all()                     # random tokens are characters


def test_masking_is_reproducible_with_a_generator():
    ids = _ids(4, 50)
    a = mask_tokens(ids, VOCAB, generator=torch.Generator().manual_seed(3))
    b = mask_tokens(ids, VOCAB, generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_check_mask_tokens_accepts_the_package_and_rejects_a_wrong_rule():
    assert check_mask_tokens(lambda ids, v, g: mask_tokens(ids, v, generator=g)[:2])
    with pytest.raises(AssertionError, match="chosen: expected 15%"):
        check_mask_tokens(lambda ids, v, g: mask_tokens(ids, v, p=0.3, generator=g)[:2])


def _restore(enc, tgt, vocab):
    """Put the spans of the target back where their sentinels sit in the encoder input."""
    spans, cur = {}, None
    for t in tgt:
        if vocab.is_sentinel(t):
            cur = t
            spans[cur] = []
        elif t != vocab.eos:
            spans[cur].append(t)
    out = []
    for t in enc:
        out += spans[t] if vocab.is_sentinel(t) else [t]
    return out


def test_span_corruption_round_trip_and_statistics():
    ids = _ids(300, 64, seed=2)
    g = torch.Generator().manual_seed(4)
    enc, dec_in, dec_out, noise = span_corrupt(ids, VOCAB, generator=g)
    n_noise, n_spans = span_layout(64)
    assert (n_noise, n_spans) == (10, 3)
    assert enc.shape == (300, 64 - n_noise + n_spans) and dec_out.shape == (300, n_noise + n_spans + 2)
    assert (noise.sum(1) == n_noise).all()
    for i in range(300):
        assert _restore(enc[i].tolist(), dec_out[i].tolist(), VOCAB) == ids[i].tolist()
    # the decoder reads the target shifted right by one, starting from [BOS] (not from a sentinel)
    assert (dec_in[:, 0] == VOCAB.bos).all() and torch.equal(dec_in[:, 1:], dec_out[:, :-1])
    assert (dec_out[:, 0] == VOCAB.sentinel(0)).all() and (dec_out[:, -1] == VOCAB.eos).all()
    # spans: runs of noise; their mean length is n_noise / n_spans = 3.33
    starts = noise[:, 1:] & ~noise[:, :-1]
    assert starts.sum(1).le(n_spans).all() and noise[:, 0].logical_not().all()
    lengths = torch.tensor([len(s) for row in noise.tolist() for s in "".join("x" if b else " " for b in row).split()])
    assert 3.0 < lengths.float().mean().item() < 3.7 and lengths.max() > 3


def test_span_corruption_worked_example():
    text = "I love Beijing"
    chars = sorted(set(text))
    v = PretrainVocab(len(chars), n_sentinels=4)
    ids = torch.tensor([[chars.index(c) for c in text]])
    enc, _, dec_out, noise = span_corrupt(ids, v, noise=0.3, mean_span=2, generator=torch.Generator().manual_seed(0))
    names = v.names(chars)
    shown_in = "".join(names[i] for i in enc[0].tolist())
    shown_out = "".join(names[i] for i in dec_out[0].tolist())
    assert shown_in.count("<X") == 2 and shown_out.startswith("<X0>") and shown_out.endswith("<X2>[EOS]")
    assert _restore(enc[0].tolist(), dec_out[0].tolist(), v) == ids[0].tolist()


@pytest.mark.parametrize("call, exc, fragment", [
    (lambda: mask_tokens(torch.rand(2, 5), VOCAB), TypeError,
     "ids (character ids, no specials yet) must hold integer ids"),
    (lambda: mask_tokens(torch.zeros(5, dtype=torch.long), VOCAB), ValueError,
     "ids (B, T) must be 2-D, got shape (5,)"),
    (lambda: mask_tokens(torch.full((2, 5), 70), VOCAB), ValueError, "no specials yet"),
    (lambda: mask_tokens(_ids(2, 5), VOCAB, p=1.5), ValueError, "p must lie in [0, 1), got 1.5"),
    (lambda: mask_tokens(_ids(2, 5), VOCAB, p=0), ValueError, "p must be a number > 0, got 0"),
    (lambda: mask_tokens(_ids(2, 5), VOCAB, mask_frac=0.95, random_frac=0.1), ValueError, "at most 1"),
    (lambda: span_corrupt(_ids(2, 64), PretrainVocab(65, n_sentinels=2)), ValueError, "need 4 sentinels"),
    (lambda: span_corrupt(_ids(2, 64), VOCAB, mean_span=0), ValueError, "mean_span must be"),
    (lambda: PretrainVocab(0), ValueError, "n_chars must be a positive int"),
    (lambda: EncoderConfig(vocab_size=10, d_model=30, n_heads=4), ValueError, "d_model must be divisible by n_heads"),
    (lambda: _bert()(torch.zeros(1, 40, dtype=torch.long)), ValueError, "longer than context_len=32"),
    (lambda: _bert()(torch.full((1, 4), 99)), ValueError, "token ids must lie in [0, 20)"),
    (lambda: _bert()(torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 4, dtype=torch.bool)), ValueError,
     "at least one real"),
])
def test_bad_input_is_refused_with_a_clear_message(call, exc, fragment):
    with pytest.raises(exc) as err:
        call()
    assert fragment in str(err.value)


def _bert(**kw):
    torch.manual_seed(0)
    return BERT(EncoderConfig(**{"vocab_size": 20, "context_len": 32, "d_model": 24, "n_heads": 3, "n_layers": 2,
                                 **kw})).eval()


def test_bert_sees_both_sides_and_gpt_does_not():
    """Perturb one input token: every BERT output changes; in a GPT only the outputs at and after it."""
    from book.gpt import GPT, GPTConfig
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=20, context_len=32, d_model=24, n_heads=3, n_layers=2)).eval()
    x = torch.randint(0, 20, (1, 9), generator=torch.Generator().manual_seed(0))
    y = x.clone()
    y[0, 4] = (y[0, 4] + 1) % 20
    with torch.no_grad():
        bert_changed = (_bert()(x) - _bert()(y)).abs().amax(-1)[0] > 1e-6
        gpt_changed = (gpt(x) - gpt(y)).abs().amax(-1)[0] > 1e-6
    assert bert_changed.all()
    assert gpt_changed.tolist() == [False] * 4 + [True] * 5


def test_bert_equals_torch_transformer_encoder_with_copied_weights():
    from book.blocks import to_torch_encoder_layer
    model = _bert()
    for block in model.blocks:   # non-trivial LayerNorms, so a swapped norm is caught
        for ln in (block.ln1, block.ln2):
            nn.init.normal_(ln.weight, 1.0, 0.1)
            nn.init.normal_(ln.bias, 0.0, 0.1)
    ref = nn.TransformerEncoder(to_torch_encoder_layer(model.blocks[0]), model.config.n_layers,
                                enable_nested_tensor=False)
    ref.layers = nn.ModuleList(to_torch_encoder_layer(block) for block in model.blocks)
    ref.eval()
    with torch.no_grad():
        x = model.pos_emb(model.tok_emb(torch.randint(0, 20, (2, 7))))
        keep = torch.ones(2, 7, dtype=torch.bool)
        keep[1, 5:] = False
        ours = x
        for block in model.blocks:
            ours = block(ours, mask=keep[:, None, None, :])
        theirs = ref(x, src_key_padding_mask=~keep)   # PyTorch's convention: True = padding
    assert_close(ours[0], theirs[0], atol=1e-5, rtol=1e-5)
    assert_close(ours[1, :5], theirs[1, :5], atol=1e-5, rtol=1e-5)


def test_bert_padding_keys_change_nothing():
    model = _bert()
    x = torch.randint(0, 20, (1, 6), generator=torch.Generator().manual_seed(1))
    padded = torch.cat([x, torch.zeros(1, 3, dtype=torch.long)], 1)
    keep = torch.tensor([[True] * 6 + [False] * 3])
    with torch.no_grad():
        assert_close(model(padded, keep)[:, :6], model(x), atol=1e-5, rtol=1e-5)
