"""Chapter 2, the limits of the RNN: the encoder-decoder drawing and the LSTM-step exercise checker.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from ..checks import pair as _pair, returned
from ..diagrams import Diagram, ROLES, _SRC, _TGT

__all__ = ["draw_rnn_encoder_decoder", "check_lstm_step"]


def _encoder_row(d: Diagram, xs, y_tok: float, y_h: float, states: bool) -> None:
    """Source words (tokens) under a chain of encoder states h_1..h_S, each waiting for the one before."""
    for i, (x, word) in enumerate(zip(xs, _SRC)):
        d.box(x, y_tok, word, role="token", w=1.25)
        d.box(x, y_h, f"$h_{i + 1}$" if states else "GRU", role="rnn", w=1.25)
        d.arrow((x, y_tok + 0.35), (x, y_h - 0.35))
        if i:
            d.arrow((xs[i - 1] + 0.63, y_h), (x - 0.63, y_h))


def draw_rnn_encoder_decoder():
    """Chapter 2's encoder-decoder: the encoder's last state is the one summary vector the decoder sees.

    Source words feed a chain of encoder states; only the final one leaves the encoder, as the summary c,
    which starts the decoder and is fed again at every decoder step. Returns a matplotlib Figure.
    """
    d = Diagram(17, 5.6, title="Encoder–decoder without attention: the whole source squeezed into one vector")
    xs, ds, mem = [1.0, 2.7, 4.4, 6.1], [10.4, 12.4, 14.4, 16.0], ROLES["memory"][1]
    _encoder_row(d, xs, 0.8, 3.0, states=False)
    d.group(0.15, 0.25, 6.95, 3.7, "encoder (reads the source)", role="rnn")
    d.box(8.25, 3.0, "summary $c$", role="memory", w=1.5, h=0.8, bold=True)
    d.arrow((6.73, 3.0), (7.5, 3.0))
    d.text(8.2, 4.45, "one vector of\nfixed size, however\nlong the sentence", fontsize=8, italic=True, color=mem)
    for t, (x, word) in enumerate(zip(ds, _TGT[:-1])):
        d.box(x, 0.8, word, role="token", w=1.35)
        d.box(x, 3.0, f"$s_{t + 1}$", role="rnn", w=1.25)
        d.box(x, 4.6, _TGT[t + 1], role="token", w=1.35)
        d.arrow((x - 0.2, 1.15), (x - 0.2, 2.65))
        d.arrow((x, 3.35), (x, 4.25))
        d.arrow((x + 0.3, 1.75), (x + 0.3, 2.65), color=mem, dashed=True)
        if t:
            d.arrow((ds[t - 1] + 0.63, 3.0), (x - 0.63, 3.0))
    d.arrow((9.0, 3.0), (ds[0] - 0.63, 3.0))
    d.line([(8.25, 2.6), (8.25, 1.75), (ds[-1] + 0.3, 1.75)], color=mem, dashed=True)
    d.text(8.25, 1.2, "$c$ again at\nevery step", fontsize=8, color=mem)
    d.group(9.45, 0.25, 16.85, 5.15, "decoder (writes the translation, one word per step)", role="rnn")
    return d.figure


def check_lstm_step(fn) -> bool:
    """Self-check for the Chapter 2 exercise: fn(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh)
    -> (h', c') must match nn.LSTMCell (gate order i, f, g, o). Raises AssertionError with a hint."""
    g = torch.Generator().manual_seed(0)
    cell = nn.LSTMCell(4, 3)
    x, h, c = torch.randn(2, 4, generator=g), torch.randn(2, 3, generator=g), torch.randn(2, 3, generator=g)
    h_ref, c_ref = cell(x, (h, c))
    h_new, c_new = _pair(returned(fn(x, h, c, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)),
                         "(h_new, c_new)")
    # explicit raises, not `assert`: the check must still reject wrong answers under `python -O`
    if tuple(h_new.shape) != (2, 3) or tuple(c_new.shape) != (2, 3):
        raise AssertionError(f"h' and c' should be (B, H) = (2, 3), got {tuple(h_new.shape)} and "
                             f"{tuple(c_new.shape)}")
    if not torch.allclose(c_new, c_ref, atol=1e-5):
        raise AssertionError("c' differs: c' = f * c + i * g (gate order i, f, g, o)")
    if not torch.allclose(h_new, h_ref, atol=1e-5):
        raise AssertionError("c' is right but h' differs: h' = o * tanh(c')")
    return True
