"""Tests of book/seq2seq.py: additive attention, encoder, decoders, greedy decoding, training."""
import random

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from book.seq2seq import (AdditiveAttention, Decoder, Encoder, MultiplicativeAttention, Seq2Seq, Seq2SeqConfig,
                          build_seq2seq, train_seq2seq)
from book.chapters.ch03 import check_general_score
from book.tasks import BOS, EOS, PAD, ToyTranslation

B, S, D_DEC, D_ENC, D_ATT = 2, 5, 3, 8, 4     # all distinct, so transposes cannot hide
TASK = ToyTranslation()


def small_model(attention="additive", seed=0):
    torch.manual_seed(seed)
    cfg = Seq2SeqConfig(len(TASK.src_vocab), len(TASK.tgt_vocab), d_emb=6, d_enc=4, d_dec=7, d_att=5,
                        attention=attention)
    return build_seq2seq(cfg).eval()


def test_additive_attention_matches_the_formula():
    torch.manual_seed(0)
    att = AdditiveAttention(D_DEC, D_ENC, D_ATT)
    assert att.W_a.weight.shape == (D_ATT, D_DEC) and att.U_a.weight.shape == (D_ATT, D_ENC)
    assert att.v_a.shape == (D_ATT,)
    s, H = torch.randn(B, D_DEC), torch.randn(B, S, D_ENC)
    context, w = att(s, H)
    assert context.shape == (B, D_ENC) and w.shape == (B, S)
    e = torch.stack([torch.stack([att.v_a @ torch.tanh(att.W_a.weight @ s[b] + att.U_a.weight @ H[b, i])
                                  for i in range(S)]) for b in range(B)])
    torch.testing.assert_close(w, torch.softmax(e, -1))
    torch.testing.assert_close(context, torch.einsum("bs,bsd->bd", torch.softmax(e, -1), H))


def test_softmax_and_weighted_sum_are_pytorchs_attention_with_scores_as_bias():
    torch.manual_seed(1)
    att = AdditiveAttention(D_DEC, D_ENC, D_ATT)
    s, H = torch.randn(B, D_DEC), torch.randn(B, S, D_ENC)
    mask = torch.tensor([[True] * S, [True] * 3 + [False] * 2])          # True = may attend
    context, _ = att(s, H, mask)
    bias = att.scores(s, att.project_keys(H)).masked_fill(~mask, float("-inf"))
    zero_q = torch.zeros(B, 1, D_ENC)            # zero queries: q.k = 0, so only the bias scores count
    ref = F.scaled_dot_product_attention(zero_q, H, H, attn_mask=bias.unsqueeze(1)).squeeze(1)
    torch.testing.assert_close(context, ref)


def test_mask_gives_padding_zero_weight_and_rows_sum_to_one():
    torch.manual_seed(2)
    for att in (AdditiveAttention(D_DEC, D_ENC, D_ATT), MultiplicativeAttention(D_DEC, D_ENC)):
        s, H = torch.randn(B, D_DEC), torch.randn(B, S, D_ENC)
        mask = torch.tensor([[True, True, False, False, False], [True] * S])   # True = may attend
        context, w = att(s, H, mask)
        assert (w[0, 2:] == 0).all()
        torch.testing.assert_close(w.sum(-1), torch.ones(B))
        torch.testing.assert_close(context[0], w[0, :2] @ H[0, :2])   # padding values never leak


def test_precomputed_keys_give_the_same_result():
    torch.manual_seed(3)
    att = AdditiveAttention(D_DEC, D_ENC, D_ATT)
    s, H = torch.randn(B, D_DEC), torch.randn(B, S, D_ENC)
    a, b = att(s, H), att(s, H, projected_keys=att.project_keys(H))
    torch.testing.assert_close(a, b)


def test_multiplicative_attention_is_s_W_h():
    torch.manual_seed(4)
    att = MultiplicativeAttention(D_DEC, D_ENC)
    s, H = torch.randn(B, D_DEC), torch.randn(B, S, D_ENC)
    _, w = att(s, H)
    torch.testing.assert_close(w, torch.softmax(torch.einsum("bd,de,bse->bs", s, att.W.weight, H), -1))


def test_check_general_score_accepts_right_and_rejects_wrong():
    assert check_general_score(lambda s, H, W: torch.einsum("bd,de,bse->bs", s, W, H))
    with pytest.raises(AssertionError, match="values differ"):
        check_general_score(lambda s, H, W: torch.einsum("bd,de,bse->bs", s, W, H) * 2)
    with pytest.raises(AssertionError, match="shape"):
        check_general_score(lambda s, H, W: torch.einsum("bd,de,bse->bsd", s, W, H))


def test_encoder_ignores_padding():
    torch.manual_seed(5)
    enc = Encoder(len(TASK.src_vocab), 6, 4)
    src = torch.tensor([[3, 4, 5, PAD, PAD], [6, 7, 8, 9, 10]])
    H, summary = enc(src)
    assert H.shape == (2, 5, 8) and summary.shape == (2, 8)
    H0, summary0 = enc(src[:1, :3])              # the first sentence alone, no padding
    torch.testing.assert_close(H[:1, :3], H0)
    torch.testing.assert_close(summary[:1], summary0)
    assert (H[0, 3:] == 0).all()
    out, h_n = enc.rnn(enc.embed(src[1:]))       # PyTorch's own bidirectional GRU, unpacked
    torch.testing.assert_close(H[1:], out)
    torch.testing.assert_close(summary[1:], torch.cat([h_n[0], h_n[1]], -1))


def test_decoder_step_shapes_with_and_without_attention():
    torch.manual_seed(6)
    for attention in (None, AdditiveAttention(7, 8, 5)):
        dec = Decoder(len(TASK.tgt_vocab), 6, 8, 7, attention)
        H, summary = torch.randn(B, S, 8), torch.randn(B, 8)
        s = dec.start(H, summary)
        logits, s2, w = dec.step(torch.tensor([BOS, BOS]), s, H, summary, None)
        assert logits.shape == (B, len(TASK.tgt_vocab)) and s2.shape == (B, 7)
        assert (w is None) == (attention is None)


@pytest.mark.parametrize("attention", ["none", "additive", "multiplicative"])
def test_forward_greedy_consistent_and_padding_invariant(attention):
    model = small_model(attention)
    batch = TASK.make_batch([TASK.sample(random.Random(i), n) for i, n in [(0, 4), (1, 9)]])
    logits = model(batch.src, batch.tgt_in)
    assert logits.shape == (2, batch.tgt_in.shape[1], len(TASK.tgt_vocab))
    padded = torch.cat([batch.src, torch.full((2, 3), PAD)], 1)      # extra padding changes nothing
    torch.testing.assert_close(model(padded, batch.tgt_in), logits)
    ids, w = model.greedy(batch.src, 6)
    assert ids.shape[0] == 2 and ids.shape[1] <= 6
    # teacher forcing on the model's own greedy output reproduces it
    tf = model(batch.src, torch.cat([torch.full((2, 1), BOS), ids[:, :-1].clamp(min=0)], 1)).argmax(-1)
    first_eos = [(row == EOS).nonzero()[0].item() if (row == EOS).any() else len(row) for row in ids]
    for b in range(2):
        assert torch.equal(tf[b, :first_eos[b] + 1][:ids.shape[1]], ids[b, :first_eos[b] + 1])
    if attention == "none":
        assert w is None
    else:
        assert w.shape == (2, ids.shape[1], batch.src.shape[1])
        torch.testing.assert_close(w.sum(-1), torch.ones(2, ids.shape[1]))
        assert (w[0, :, 4:] == 0).all()


def test_greedy_pads_after_eos_and_stops_when_all_done():
    model = small_model("none")
    with torch.no_grad():                        # force EOS at every step
        model.decoder.out_proj.bias.fill_(-100)
        model.decoder.out_proj.bias[EOS] = 100
    ids, _ = model.greedy(torch.tensor([[3, 4, 5]]), 10)
    assert ids.tolist() == [[EOS]]


def test_train_seq2seq_reduces_the_loss():
    model = small_model("additive")
    hist = train_seq2seq(model, TASK, steps=80, batch_size=16, lr=1e-2, max_len=6,
                         generator=torch.Generator().manual_seed(0), progress=False)
    assert len(hist) == 80 and sum(hist[-5:]) / 5 < sum(hist[:5]) / 5 - 0.5
    assert not model.training


def test_bad_arguments():
    with pytest.raises(ValueError, match="attention must be"):
        build_seq2seq(Seq2SeqConfig(10, 10, attention="dot"))
    with pytest.raises(ValueError, match="sizes must be positive"):
        AdditiveAttention(0, 3, 4)
    with pytest.raises(ValueError, match="sizes must be positive"):
        MultiplicativeAttention(3, 0)
    att = AdditiveAttention(D_DEC, D_ENC, D_ATT)
    with pytest.raises(ValueError, match=r"expected query \(B, Ddec\)"):
        att(torch.randn(B, 1, D_DEC), torch.randn(B, S, D_ENC))
    with pytest.raises(ValueError, match="keep_mask should have shape"):
        att(torch.randn(B, D_DEC), torch.randn(B, S, D_ENC), torch.zeros(B, S + 1, dtype=torch.bool))
    model = small_model("none")
    with pytest.raises(ValueError, match="at least one non-PAD"):
        model(torch.tensor([[PAD, PAD]]), torch.tensor([[BOS]]))
    with pytest.raises(ValueError, match="max_len must be"):
        model.greedy(torch.tensor([[3]]), 0)
    with pytest.raises(ValueError, match="steps must be a positive int"):
        train_seq2seq(model, TASK, steps=0)
    assert isinstance(model, Seq2Seq) and isinstance(model.decoder.cell, nn.GRUCell)


def _rates_of_a_run(monkeypatch, **kw):
    """(optimizer, the rate at every step) of a 10-step train_seq2seq run."""
    import book.seq2seq as s2s

    built, rates = [], []
    real = s2s.build_optimizer
    monkeypatch.setattr(s2s, "build_optimizer", lambda *a, **k: built.append(real(*a, **k)) or built[-1])
    model = small_model("none")
    model.register_forward_pre_hook(lambda m, args: rates.append(built[0].param_groups[0]["lr"]))
    train_seq2seq(model, TASK, steps=10, batch_size=4, lr=1e-2, max_len=6, generator=torch.Generator().manual_seed(0),
                  progress=False, **kw)
    return built[0], rates


def test_train_seq2seq_trains_like_every_transformer_and_keeps_the_rnns_setting(monkeypatch):
    opt, rates = _rates_of_a_run(monkeypatch, warmup=3)
    assert type(opt) is torch.optim.AdamW and rates[:3] == pytest.approx([1e-2 / 4, 2e-2 / 4, 3e-2 / 4])
    assert {g["weight_decay"] for g in opt.param_groups} == {0.1, 0.0}     # matrices only
    adam, rates = _rates_of_a_run(monkeypatch, optimizer="adam", warmup=0)  # chapters 2 and 3: Adam + cosine
    ref = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(ref, 10, eta_min=1e-3)
    expected = []
    for _ in range(10):
        expected.append(ref.param_groups[0]["lr"])
        ref.step()
        sched.step()
    assert type(adam) is torch.optim.Adam and rates == pytest.approx(expected)
