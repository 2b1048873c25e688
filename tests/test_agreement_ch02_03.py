"""The from-scratch cells of Chapters 2 and 3 agree with the `book` package (all dims distinct, T > 1)."""
import pytest
import torch
from nbtools import scratch_namespace

from book.rnn import RNN
from book.seq2seq import AdditiveAttention, Seq2SeqConfig, build_seq2seq
from book.tasks import BOS, PAD

B, T, D, H = 2, 5, 3, 4
S, D_DEC, D_ENC, A = 6, 7, 8, 5


@pytest.fixture(scope="module")
def ch2():
    return scratch_namespace("02_rnn_limits.ipynb")


@pytest.fixture(scope="module")
def ch3():
    return scratch_namespace("03_bahdanau_attention.ipynb")


def test_ch2_rnn_step_and_loop_match_book_rnn(ch2):
    torch.manual_seed(0)
    rnn = RNN(D, H)
    c = rnn.cell
    x, h0 = torch.randn(B, T, D), torch.randn(B, H)
    states, last = ch2["rnn_forward"](x, h0, c.weight_ih, c.weight_hh, c.bias_ih, c.bias_hh)
    ref_states, ref_last = rnn(x, h0)
    torch.testing.assert_close(states, ref_states)
    torch.testing.assert_close(last, ref_last)
    torch.testing.assert_close(ch2["rnn_step"](x[:, 0], h0, c.weight_ih, c.weight_hh, c.bias_ih, c.bias_hh),
                               c(x[:, 0], h0))


def test_ch3_additive_attention_matches_book(ch3):
    torch.manual_seed(1)
    att = AdditiveAttention(D_DEC, D_ENC, A)
    s, Hs = torch.randn(B, D_DEC), torch.randn(B, S, D_ENC)
    keep = torch.ones(B, S, dtype=torch.bool)
    keep[1, 4:] = False                        # True = may attend: the last keys of row 1 are padding
    for mask in (None, keep):
        ctx, w = ch3["additive_attention"](s, Hs, att.W_a.weight, att.U_a.weight, att.v_a, mask)
        ref_ctx, ref_w = att(s, Hs, mask)
        torch.testing.assert_close(ctx, ref_ctx)
        torch.testing.assert_close(w, ref_w)
    scores = ch3["additive_scores"](s, Hs, att.W_a.weight, att.U_a.weight, att.v_a)
    torch.testing.assert_close(scores, att.scores(s, att.project_keys(Hs)))


def test_ch3_decoder_step_matches_book_decoder(ch3):
    torch.manual_seed(2)
    cfg = Seq2SeqConfig(11, 13, d_emb=6, d_enc=D_ENC // 2, d_dec=D_DEC, d_att=A)
    model = build_seq2seq(cfg)
    src = torch.randint(3, 11, (B, S))
    src[0, 4:] = PAD
    H_enc, summary = model.encoder(src)
    dec = model.decoder
    s0, y0, keep = dec.start(H_enc, summary), torch.full((B,), BOS), src != PAD
    a = dec.attention
    attend = lambda s, Hs, m: ch3["additive_attention"](s, Hs, a.W_a.weight, a.U_a.weight, a.v_a, m)  # noqa: E731
    ours = ch3["attention_decoder_step"](y0, s0, H_enc, keep, dec.embed, attend, dec.cell, dec.out_proj)
    theirs = dec.step(y0, s0, H_enc, summary, keep)
    for o, t in zip(ours, theirs):
        torch.testing.assert_close(o, t)
    assert ours[0].shape == (B, 13) and ours[1].shape == (B, D_DEC) and ours[2].shape == (B, S)
