"""Tests of book/rnn.py: the RNN cell and loop against nn.RNN, the char LM, recall and gradients."""
import pytest
import torch
import torch.nn as nn

from book.rnn import (RNN, CharRNN, RNNCell, gradient_by_distance, input_gradients, recall_accuracy, train_recall,
                      curriculum_max_distance, train_recall_many, recall_many_accuracy)
from book.chapters.ch02 import check_lstm_step

B, T, D, H = 2, 5, 3, 4     # all distinct


def test_rnn_cell_is_the_formula():
    torch.manual_seed(0)
    cell = RNNCell(D, H)
    x, h = torch.randn(B, D), torch.randn(B, H)
    want = torch.tanh(x @ cell.weight_ih.T + cell.bias_ih + h @ cell.weight_hh.T + cell.bias_hh)
    torch.testing.assert_close(cell(x, h), want)
    assert cell.weight_ih.shape == (H, D) and cell.weight_hh.shape == (H, H)


def test_rnn_loop_matches_torch_rnn_with_copied_weights():
    torch.manual_seed(1)
    ref = nn.RNN(D, H, batch_first=True)
    ours = RNN(D, H).load_from(ref)
    x, h0 = torch.randn(B, T, D), torch.randn(B, H)
    out, h_T = ours(x, h0)
    ref_out, ref_h = ref(x, h0[None])
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(h_T, ref_h[0])
    out0, _ = ours(x)                                   # h0 defaults to zeros, as in PyTorch
    torch.testing.assert_close(out0, ref(x)[0])


@pytest.mark.parametrize("cell", ["rnn", "lstm", "gru"])
def test_char_rnn_shapes_and_embedding_path(cell):
    torch.manual_seed(2)
    model = CharRNN(vocab_size=7, d_emb=3, d_hidden=H, cell=cell)
    x = torch.randint(0, 7, (B, T))
    logits = model(x)
    assert logits.shape == (B, T, 7)
    torch.testing.assert_close(model.from_embeddings(model.embed(x)), logits)
    # causal: changing the last input leaves earlier outputs alone
    x2 = x.clone()
    x2[:, -1] = (x2[:, -1] + 1) % 7
    torch.testing.assert_close(model(x2)[:, :-1], logits[:, :-1])


def test_char_rnn_trains_with_the_shared_lm_loop():
    from book.train import train_lm
    torch.manual_seed(3)
    data = torch.tensor([0, 1, 2, 3] * 200)            # a perfectly predictable stream
    model = CharRNN(4, 8, 16, "lstm")
    hist = train_lm(model, data, data, steps=60, batch_size=8, context_len=12, lr=3e-2,
                    generator=torch.Generator().manual_seed(0), progress=False)
    assert hist.final_val < 0.3


def test_recall_training_and_accuracy():
    torch.manual_seed(4)
    model = CharRNN(5, 8, 16, "lstm")
    hist = train_recall(model, steps=150, seq_len=4, n_values=4, batch_size=32, lr=1e-2,
                        generator=torch.Generator().manual_seed(0), progress=False)
    assert len(hist) == 150 and not model.training
    acc = recall_accuracy(model, 4, [1, 2, 3], n_values=4, n=64, generator=torch.Generator().manual_seed(1))
    assert set(acc) == {1, 2, 3} and all(0 <= a <= 1 for a in acc.values())
    assert min(acc.values()) > 0.5                     # far above chance (0.25) at these short distances


def test_curriculum_grows_the_longest_distance_from_2_to_the_full_range():
    ks = [curriculum_max_distance(s, 100, 65) for s in range(100)]
    assert ks[0] == 2 and ks[50] == ks[-1] == 64 and ks == sorted(ks)
    assert curriculum_max_distance(0, 10, 65, ramp=0) == 64
    with pytest.raises(ValueError, match="seq_len >= 3"):
        curriculum_max_distance(0, 10, 2)
    with pytest.raises(ValueError, match="ramp"):
        curriculum_max_distance(0, 10, 9, ramp=1.5)


def test_curriculum_training_asks_short_distances_first(monkeypatch):
    import book.rnn as rnn
    asked = []
    real = rnn.recall_batch

    def spy(*args, **kwargs):
        asked.append(kwargs.get("max_distance"))
        return real(*args, **kwargs)

    monkeypatch.setattr(rnn, "recall_batch", spy)
    train_recall(CharRNN(9, 4, 4, "rnn"), steps=10, seq_len=21, batch_size=2, curriculum=True, progress=False)
    assert asked[0] == 2 and asked[-1] == 20 and asked == sorted(asked)
    asked.clear()
    train_recall(CharRNN(9, 4, 4, "rnn"), steps=3, seq_len=21, batch_size=2, progress=False)
    assert asked == [None] * 3                               # uniform: no limit


def test_recall_many_training_and_accuracy():
    torch.manual_seed(4)
    model = CharRNN(6, 8, 32, "lstm")
    hist = train_recall_many(model, steps=200, n_digits=2, delay=1, n_values=4, batch_size=32, lr=1e-2,
                             generator=torch.Generator().manual_seed(0), progress=False)
    assert len(hist) == 200 and not model.training and hist[-1] < hist[0]
    acc = recall_many_accuracy(model, 2, 1, n_values=4, n=128, generator=torch.Generator().manual_seed(1))
    assert len(acc) == 2 and min(acc) > 0.6                 # far above chance (0.25)
    with pytest.raises(ValueError, match="n must be a positive int"):
        recall_many_accuracy(model, 2, 1, n=0)


def test_gradient_by_distance_is_zero_without_recurrence():
    torch.manual_seed(5)
    model = CharRNN(9, 4, 6, "rnn")
    with torch.no_grad():
        model.rnn.weight_hh_l0.zero_()                 # no path from the past: only k = 1 can matter
    g = gradient_by_distance(model, seq_len=8, distances=[1, 2, 5], n=16,
                             generator=torch.Generator().manual_seed(0))
    assert g[1] > 0 and g[2] == 0 and g[5] == 0
    x = torch.randint(0, 9, (B, 8))
    per_position = input_gradients(model, x, torch.zeros(B, dtype=torch.long))
    assert per_position.shape == (B, 8) and (per_position[:, :-1] == 0).all() and (per_position[:, -1] > 0).all()


def test_gradient_by_distance_decays_for_a_contracting_rnn():
    torch.manual_seed(6)
    model = CharRNN(9, 4, 6, "rnn")
    with torch.no_grad():
        model.rnn.weight_hh_l0.copy_(0.3 * torch.eye(6))
    g = gradient_by_distance(model, 12, [1, 3, 6, 10], n=32, generator=torch.Generator().manual_seed(0))
    assert g[1] > g[3] > g[6] > g[10] > 0


def test_check_lstm_step_accepts_right_and_rejects_wrong():
    def lstm_step(x, h, c, w_ih, w_hh, b_ih, b_hh):
        i, f, g, o = (x @ w_ih.T + b_ih + h @ w_hh.T + b_hh).chunk(4, -1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c

    assert check_lstm_step(lstm_step)

    def swapped_gates(x, h, c, w_ih, w_hh, b_ih, b_hh):
        f, i, g, o = (x @ w_ih.T + b_ih + h @ w_hh.T + b_hh).chunk(4, -1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c

    with pytest.raises(AssertionError, match="c' differs"):
        check_lstm_step(swapped_gates)

    def no_tanh(x, h, c, w_ih, w_hh, b_ih, b_hh):
        h2, c2 = lstm_step(x, h, c, w_ih, w_hh, b_ih, b_hh)
        return torch.sigmoid((x @ w_ih.T + b_ih + h @ w_hh.T + b_hh).chunk(4, -1)[3]) * c2, c2

    with pytest.raises(AssertionError, match="h' differs"):
        check_lstm_step(no_tanh)


def test_bad_arguments():
    with pytest.raises(ValueError, match="d_in and d_hidden must be positive"):
        RNNCell(0, 3)
    with pytest.raises(ValueError, match=r"x should have shape \(B, T, 3\)"):
        RNN(3, 4)(torch.randn(2, 5, 4))
    with pytest.raises(ValueError, match="one-layer, unidirectional"):
        RNN(3, 4).load_from(nn.RNN(3, 4, num_layers=2))
    with pytest.raises(ValueError, match="cell must be one of"):
        CharRNN(5, cell="transformer")
    with pytest.raises(ValueError, match="must be positive"):
        CharRNN(5, d_hidden=0)
    with pytest.raises(ValueError, match=r"x should have shape \(B, T\)"):
        CharRNN(5)(torch.zeros(2, 3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="steps must be"):
        train_recall(CharRNN(5), steps=0, seq_len=4)


def test_recall_training_takes_any_model_that_maps_ids_to_logits():
    from book.attention import OneLayerAttention       # chapter 4 trains its attention layer on the same rule
    torch.manual_seed(4)
    model = OneLayerAttention(5, d=16)
    hist = train_recall(model, steps=150, seq_len=6, n_values=4, batch_size=32, lr=1e-2,
                        generator=torch.Generator().manual_seed(0), progress=False)
    assert len(hist) == 150 and not model.training
    acc = recall_accuracy(model, 6, [1, 3, 5], n_values=4, n=64, generator=torch.Generator().manual_seed(1))
    assert min(acc.values()) > 0.5                     # far above chance (0.25)
