"""Architecture diagrams drawn by code: boxes, arrows and labels in one style. Chapters 2-10.

Every diagram in the book is a function here that returns a matplotlib Figure (pyplot-free, like book.plots),
so it is reproducible, reviewable in a diff, and as sharp as any other figure (PNG at plots.PIXEL_RATIO x).
Coordinates are in "grid units": a Diagram(width, height) has x in [0, width] and y in [0, height], one unit
about 0.55 inch on screen, y pointing up. Colours name a role, not a chapter, so the same part looks the
same everywhere:

    token   inputs and outputs (ids, characters, logits)
    embed   embeddings and positions
    rnn     recurrent cells and their states
    attn    attention (scores, weights, heads)
    ffn     feed-forward layers
    norm    LayerNorm / RMSNorm
    memory  what is kept and reused (the summary vector, encoder memory, the KV cache)
    plain   anything else (sums, softmax, arithmetic)

Example:
    d = Diagram(6, 3, title="one residual block")
    d.box(1, 1.5, "LayerNorm", role="norm"); d.box(3, 1.5, "attention", role="attn")
    d.arrow((1.6, 1.5), (2.3, 1.5))
    fig = d.figure
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

from .checks import one_of, positive_int, positive_number
from .plots import SCREEN_DPI

__all__ = ["Diagram", "ROLES", "UNIT_INCH"]

UNIT_INCH = 0.55   # one grid unit on screen
# fill, edge: colour-blind-safe pairs (Okabe-Ito hues, lightened for the fill)
ROLES = {
    "token": ("#eeeeee", "#555555"),
    "embed": ("#fde9c9", "#e69f00"),
    "rnn": ("#d6eaf8", "#0072b2"),
    "attn": ("#f9d9e6", "#cc79a7"),
    "ffn": ("#d5f0e3", "#009e73"),
    "norm": ("#fff6c2", "#b59b00"),
    "memory": ("#e3dcf2", "#6a4ca5"),
    "plain": ("#ffffff", "#333333"),
}
FONT = 9


def _role(role: str) -> Tuple[str, str]:
    return ROLES[one_of(sorted(ROLES), role=role)]


class Diagram:
    """A blank canvas of width x height grid units with helpers for boxes, arrows, circles and labels."""

    def __init__(self, width: float, height: float, title: str = ""):
        positive_number(width=width, height=height)   # in grid units
        self.width, self.height = width, height
        extra = 0.45 if title else 0.0   # inches for the title
        self.figure = Figure(figsize=(width * UNIT_INCH, height * UNIT_INCH + extra), dpi=SCREEN_DPI)
        top = 1 - extra / (height * UNIT_INCH + extra)
        self.ax = self.figure.add_axes((0, 0, 1, top))
        self.ax.set_xlim(0, width)
        self.ax.set_ylim(0, height)
        self.ax.set_aspect("equal")
        self.ax.axis("off")
        if title:
            self.figure.suptitle(title, fontsize=FONT + 2, y=1 - 0.08 / (height * UNIT_INCH + extra))

    def box(self, x: float, y: float, text: str = "", role: str = "plain", w: float = 1.2, h: float = 0.7,
            fontsize: Optional[float] = None, dashed: bool = False, bold: bool = False):
        """A rounded box centred at (x, y), w x h units, with centred text. Returns its (left, bottom, w, h)."""
        fill, edge = _role(role)
        self.ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0,rounding_size=0.12",
                                         facecolor=fill, edgecolor=edge, linewidth=1.4,
                                         linestyle="--" if dashed else "-"))
        if text:
            self.ax.text(x, y, text, ha="center", va="center", fontsize=fontsize or FONT,
                         fontweight="bold" if bold else "normal")
        return (x - w / 2, y - h / 2, w, h)

    def group(self, x0: float, y0: float, x1: float, y1: float, label: str = "", role: str = "plain",
              label_at: str = "top"):
        """A dashed frame around a region (e.g. "x N layers"), its label at the top or left edge."""
        _, edge = _role(role)
        self.ax.add_patch(FancyBboxPatch((x0, y0), x1 - x0, y1 - y0, boxstyle="round,pad=0,rounding_size=0.2",
                                         facecolor="none", edgecolor=edge, linewidth=1.1, linestyle="--"))
        if label:
            if label_at == "top":
                self.ax.text((x0 + x1) / 2, y1 + 0.08, label, ha="center", va="bottom", fontsize=FONT, color=edge)
            else:
                self.ax.text(x0 - 0.1, (y0 + y1) / 2, label, ha="right", va="center", fontsize=FONT, color=edge)

    def circle(self, x: float, y: float, text: str = "+", r: float = 0.22, role: str = "plain"):
        """A small circle (a sum, a product) at (x, y)."""
        fill, edge = _role(role)
        self.ax.add_patch(Circle((x, y), r, facecolor=fill, edgecolor=edge, linewidth=1.3))
        self.ax.text(x, y, text, ha="center", va="center", fontsize=FONT + 1)

    def arrow(self, start: Sequence[float], end: Sequence[float], text: str = "", color: str = "#333333",
              curve: float = 0.0, dashed: bool = False, width: float = 1.2, text_offset=(0.0, 0.15)):
        """An arrow from start to end (grid units); curve bends it (radians-ish, + is counter-clockwise).
        Returns the arrow (a FancyArrowPatch), e.g. to tag it with set_gid for a test."""
        patch = FancyArrowPatch(tuple(start), tuple(end), arrowstyle="-|>", mutation_scale=10, color=color,
                                linewidth=width, linestyle="--" if dashed else "-",
                                connectionstyle=f"arc3,rad={curve}", shrinkA=0, shrinkB=0)
        self.ax.add_patch(patch)
        if text:
            mx, my = (start[0] + end[0]) / 2 + text_offset[0], (start[1] + end[1]) / 2 + text_offset[1]
            self.ax.text(mx, my, text, ha="center", va="bottom", fontsize=FONT - 1, color=color)
        return patch

    def line(self, points: Sequence[Sequence[float]], color: str = "#333333", width: float = 1.2,
             dashed: bool = False):
        """A polyline without a head (e.g. the first legs of a residual path)."""
        xs, ys = zip(*points)
        self.ax.plot(xs, ys, color=color, linewidth=width, linestyle="--" if dashed else "-",
                     solid_capstyle="round")

    def text(self, x: float, y: float, text: str, fontsize: Optional[float] = None, ha: str = "center",
             va: str = "center", color: str = "#222222", italic: bool = False):
        """Free text at (x, y)."""
        self.ax.text(x, y, text, ha=ha, va=va, fontsize=fontsize or FONT, color=color,
                     fontstyle="italic" if italic else "normal")


# --- chapters 2-3 ---

_SRC = ["red", "cat", "likes", "hen"]   # a sentence of the toy task (book.tasks.ToyTranslation) ...
_TGT = ["<bos>", "CAT", "RED", "HEN", "LIKES"]   # ... and its reordered translation, fed from <bos>


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


def _bidirectional_row(d: Diagram, xs, y_tok: float, y_h: float, y_cat: float) -> None:
    """Source words under a bidirectional GRU: a forward state and a backward state per word (the forward chain's
    arrows point right, the backward chain's left), concatenated into h_i = [forward; backward]."""
    rnn = ROLES["rnn"][1]
    for i, (x, word) in enumerate(zip(xs, _SRC)):
        d.box(x, y_tok, word, role="token", w=1.25)
        d.box(x - 0.42, y_h, rf"$\overrightarrow{{h}}_{i + 1}$", role="rnn", w=0.84, h=0.7)
        d.box(x + 0.42, y_h, rf"$\overleftarrow{{h}}_{i + 1}$", role="rnn", w=0.84, h=0.7)
        d.arrow((x - 0.2, y_tok + 0.35), (x - 0.42, y_h - 0.35))                # the word into both directions
        d.arrow((x + 0.2, y_tok + 0.35), (x + 0.42, y_h - 0.35))
        d.box(x, y_cat, f"$h_{i + 1}$", role="memory", w=1.3, h=0.6)
        d.arrow((x - 0.42, y_h + 0.35), (x - 0.3, y_cat - 0.3), color=rnn)     # concatenated
        d.arrow((x + 0.42, y_h + 0.35), (x + 0.3, y_cat - 0.3), color=rnn)
        if i:
            d.arrow((xs[i - 1] + 0.84, y_h + 0.15), (x - 0.84, y_h + 0.15), color=rnn)   # forward: left to right
            d.arrow((x - 0.84, y_h - 0.15), (xs[i - 1] + 0.84, y_h - 0.15), color=rnn)   # backward: right to left


def draw_bahdanau_attention():
    """Chapter 3: one decoder step with additive attention (Bahdanau et al., 2014).

    A bidirectional GRU reads the source both ways; h_i joins its forward and backward states. The previous decoder
    state s_{t-1} scores every h_i (e_ti = v_a^T tanh(W_a s_{t-1} + U_a h_i)), a softmax turns the scores into
    weights alpha_ti, and each h_i (the values) reaches the sum through its weight: c_t = sum_i alpha_ti h_i. The GRU
    step reads y_{t-1} and c_t; the next word is predicted from [s_t; c_t]. Returns a matplotlib Figure.
    """
    d = Diagram(18, 11.4, title="One decoder step with Bahdanau attention: a weighted sum of every encoder state")
    xs, mem, att = [1.3, 3.6, 5.9, 8.2], ROLES["memory"][1], ROLES["attn"][1]
    y_cat, y_q, y_e, y_soft, y_a, y_mul, y_c = 3.35, 4.3, 5.2, 6.25, 7.3, 8.45, 9.75
    _bidirectional_row(d, xs, 0.6, 2.05, y_cat)
    d.group(0.2, 0.1, 9.3, 2.6, role="rnn")
    d.text(9.55, 1.45, "bidirectional GRU encoder:\n→ reads left to right,\n← right to left",
           fontsize=8, ha="left", color=ROLES["rnn"][1])
    d.text(9.55, y_cat, r"$h_i = [\overrightarrow{h}_i; \overleftarrow{h}_i]$: all kept", fontsize=8, ha="left",
           color=mem)
    dec = 15.6
    d.box(dec, y_q, "$s_{t-1}$", role="rnn", w=1.3)
    d.text(dec + 0.05, y_q - 0.75, "previous decoder\nstate (the query)", fontsize=8, italic=True)
    d.line([(dec - 0.65, y_q), (xs[0] - 0.55, y_q)], color=att)
    for i, x in enumerate(xs):
        d.box(x - 0.3, y_e, f"$e_{{t{i + 1}}}$", role="attn", w=1.1)
        d.arrow((x - 0.15, y_cat + 0.3), (x - 0.15, y_e - 0.35))                 # h_i into its score (the key)
        d.arrow((x - 0.55, y_q), (x - 0.55, y_e - 0.35), color=att)             # s_{t-1} into every score
        d.arrow((x - 0.3, y_e + 0.35), (x - 0.3, y_a - 0.35))
        d.box(x - 0.3, y_a, rf"$\alpha_{{t{i + 1}}}$", role="attn", w=1.1)
        d.circle(x + 0.5, y_mul, r"$\times$", r=0.24, role="memory")
        d.arrow((x - 0.3, y_a + 0.35), (x + 0.3, y_mul - 0.1), color=att)      # the weight ...
        d.arrow((x + 0.5, y_cat + 0.3), (x + 0.5, y_mul - 0.24), color=mem, width=2.0)   # ... times the value h_i
    d.group(xs[0] - 1.0, y_soft - 0.3, xs[-1] + 0.35, y_soft + 0.3, role="attn")
    d.text(9.55, y_soft, "softmax over $i$ (all scores together)", fontsize=8, ha="left", color=att)
    d.text(9.55, y_mul, r"each value $h_i$ times its weight $\alpha_{ti}$", fontsize=8, ha="left", color=mem)
    d.text(9.55, y_e, "scores\n" r"$e_{ti} = v_a^\top \tanh(W_a s_{t-1} + U_a h_i)$", fontsize=8, ha="left")
    d.text(9.55, y_a, "weights $\\alpha_{ti} > 0$,\nsumming to 1 over $i$", fontsize=8, ha="left")
    sum_xy = (10.4, y_c)
    d.circle(*sum_xy, text=r"$\Sigma$", r=0.3, role="memory")
    for x in xs:
        d.arrow((x + 0.5, y_mul + 0.24), (sum_xy[0] - 0.3, sum_xy[1]), color=mem, curve=-0.12)
    d.text(4.6, 10.75, r"context $c_t = \sum_i \alpha_{ti} h_i$: the encoder states (values), weighted and summed",
           fontsize=8, color=mem)
    c_xy = (12.0, y_c)
    d.box(*c_xy, "$c_t$", role="memory", w=1.0, bold=True)
    d.arrow((sum_xy[0] + 0.3, sum_xy[1]), (c_xy[0] - 0.5, c_xy[1]))
    gru = (dec, 7.0)
    d.box(*gru, "GRU step\n→ $s_t$", role="rnn", w=1.5, h=0.9)
    d.arrow((c_xy[0] + 0.2, c_xy[1] - 0.35), (gru[0] - 0.75, gru[1] + 0.2), color=mem)
    d.arrow((dec, y_q + 0.35), (gru[0], gru[1] - 0.45))
    d.box(17.25, gru[1], "$y_{t-1}$", role="token", w=1.1)
    d.arrow((16.7, gru[1]), (gru[0] + 0.75, gru[1]))
    out = (dec, y_c)
    d.box(*out, "predict from\n$[s_t; c_t]$", role="plain", w=1.9, h=0.9)
    d.arrow((gru[0], gru[1] + 0.45), (out[0], out[1] - 0.45), text="$s_t$", text_offset=(0.3, -0.1))
    d.arrow((c_xy[0] + 0.5, c_xy[1]), (out[0] - 0.95, out[1]), color=mem)
    d.box(dec, 10.95, "$y_t$", role="token", w=1.1)
    d.arrow((dec, out[1] + 0.45), (dec, 10.6))
    return d.figure


# --- chapter 7 ---

def draw_gpt_stack():
    """Chapter 7: the GPT stack (tokens -> embeddings + positions -> N Pre-Norm blocks -> LN -> lm_head -> logits),
    with the KV cache beside the attention: each layer keeps the keys and values of the tokens so far, and the new
    token's query reads them."""
    d = Diagram(12.4, 13.0, title="The GPT stack, and the KV cache beside its attention")
    x, bw = 3.6, 3.0
    d.box(x, 0.6, "tokens  x₁ … x_t", role="token", w=bw)
    d.box(x, 1.75, "token embedding  E[x]", role="embed", w=bw)
    d.box(7.6, 1.75, "position  P[t]", role="embed", w=2.2)
    d.arrow((x, 0.95), (x, 1.4))
    d.circle(x, 2.75)
    d.arrow((x, 2.1), (x, 2.53))
    d.line([(7.6, 2.1), (7.6, 2.75), (x + 0.6, 2.75)])
    d.arrow((x + 0.6, 2.75), (x + 0.22, 2.75))
    # one block: LN -> attention -> + ; LN -> FFN -> +
    d.group(1.0, 3.25, 6.2, 9.25, label="", role="attn")
    d.text(0.55, 6.15, "× N layers", ha="center", color=ROLES["attn"][1])
    d.ax.texts[-1].set_rotation(90)
    d.arrow((x, 2.97), (x, 3.9))
    d.box(x, 4.25, "LayerNorm", role="norm", w=bw)
    d.box(x, 5.3, "causal self-attention", role="attn", w=bw)
    d.circle(x, 6.25)
    d.arrow((x, 4.6), (x, 4.95))
    d.arrow((x, 5.65), (x, 6.03))
    d.line([(x, 3.6), (1.5, 3.6), (1.5, 6.25)])
    d.arrow((1.5, 6.25), (x - 0.22, 6.25))
    d.box(x, 7.05, "LayerNorm", role="norm", w=bw)
    d.box(x, 8.05, "feed-forward (FFN)", role="ffn", w=bw)
    d.circle(x, 8.85)
    d.arrow((x, 6.47), (x, 6.7))
    d.arrow((x, 7.4), (x, 7.7))
    d.arrow((x, 8.4), (x, 8.63))
    d.line([(x, 6.55), (1.5, 6.55), (1.5, 8.85)])
    d.arrow((1.5, 8.85), (x - 0.22, 8.85))
    # head
    d.arrow((x, 9.07), (x, 9.65))
    d.box(x, 10.0, "final LayerNorm", role="norm", w=bw)
    d.arrow((x, 10.35), (x, 10.75))
    d.box(x, 11.1, "lm_head (tied to E)", role="embed", w=bw)
    d.arrow((x, 11.45), (x, 11.85))
    d.box(x, 12.2, "next-token logits", role="token", w=bw)
    # the KV cache beside the attention
    d.box(9.6, 5.3, "KV cache (per layer)\nK, V of tokens 1 … t−1", role="memory", w=3.2, h=1.1)
    d.arrow((x + bw / 2, 5.55), (9.6 - 1.6, 5.55), text="append k_t, v_t", text_offset=(0, 0.05))
    d.arrow((9.6 - 1.6, 5.0), (x + bw / 2, 5.0), text="read all K, V", text_offset=(0, -0.42))
    d.text(9.6, 4.05, "the new token's query q_t\nattends to every cached key;\nonly token t runs the stack",
           fontsize=8, italic=True)
    return d.figure


# --- chapter 8 ---

MAX_DRAWN_LAYERS = 4    # more layers per stack would not fit a page; the paper's N = 6 is named in the figure
MEMORY_ARROW = "memory-to-cross-attention"   # the gid of every arrow from the memory into a decoder layer


def _stack_input(d: Diagram, x: float, w: float, tokens: str) -> None:
    """Tokens, then the scaled embedding plus sinusoidal positions, at the bottom of a stack centred at x."""
    d.box(x, 0.6, tokens, role="token", w=w, h=0.65, fontsize=8)
    d.arrow((x, 0.93), (x, 1.37))
    d.box(x, 1.7, "embedding × √C  +  sinusoidal positions", role="embed", w=w, h=0.65, fontsize=8)
    d.arrow((x, 2.03), (x, 2.6))


def draw_encoder_decoder(n_layers: int = 2) -> Figure:
    """The encoder-decoder of Vaswani et al. (2017), with `n_layers` layers in each stack (at most 4). Chapter 8.

    The encoder reads the source once; its output, the memory M (S x C), is computed once per sentence, and an
    arrow (gid MEMORY_ARROW) carries it into the cross-attention of every decoder layer as keys and values. Each
    attention names its mask: encoder self-attention the source padding, decoder self-attention the causal mask
    (which also hides the target's trailing padding), cross-attention the source padding.

    Example: fig = draw_encoder_decoder(2)   # a Figure; the chapter shows it, tests read its labels and arrows
    """
    positive_int(n_layers=n_layers)
    if n_layers > MAX_DRAWN_LAYERS:
        raise ValueError(f"n_layers must be at most {MAX_DRAWN_LAYERS} (a taller figure does not fit a page; the "
                         f"paper's N = 6 is named in the figure), got {n_layers}")
    layer_h = 3.2
    top = 2.6 + layer_h * n_layers                      # where the last layer ends
    d = Diagram(15.2, top + 3.0, title="The encoder–decoder: the memory is computed once and read by every "
                                      "decoder layer")
    xe, xm, xd, we, wd = 2.95, 7.3, 12.0, 3.9, 4.9
    mem, att = ROLES["memory"][1], ROLES["attn"][1]
    _stack_input(d, xe, we, "source words  $x_1 \\ldots x_S$  (all of them)")
    _stack_input(d, xd, wd, "target so far  <bos> $y_1 \\ldots y_{t-1}$")
    cross_y = []
    for i in range(n_layers):
        y0 = 2.6 + layer_h * i
        # encoder layer: self-attention, then FFN
        d.group(xe - 2.15, y0 + 0.15, xe + 2.15, y0 + layer_h - 0.15, role="rnn")
        d.text(xe - 2.05, y0 + layer_h - 0.38, f"encoder layer {i + 1}", fontsize=7, ha="left",
               color=ROLES["rnn"][1])
        d.box(xe, y0 + 0.95, "self-attention (all words see all)\nmask: source padding", role="attn",
              w=we, h=0.85, fontsize=7.5)
        d.arrow((xe, y0 + 1.38), (xe, y0 + 1.95))
        d.box(xe, y0 + 2.25, "feed-forward, per position", role="ffn", w=we, h=0.6, fontsize=8)
        d.arrow((xe, y0 + 2.55), (xe, y0 + layer_h + (0.0 if i == n_layers - 1 else 0.52)))
        # decoder layer: causal self-attention, cross-attention, FFN
        d.group(xd - 2.6, y0 + 0.05, xd + 2.6, y0 + layer_h - 0.05, role="attn")
        d.text(xd + 2.5, y0 + layer_h - 0.28, f"decoder layer {i + 1}", fontsize=7, ha="right", color=att)
        d.box(xd, y0 + 0.55, "causal self-attention (target so far)\nmask: causal (+ target padding)",
              role="attn", w=wd, h=0.8, fontsize=7.5)
        d.arrow((xd, y0 + 0.95), (xd, y0 + 1.1))
        d.box(xd, y0 + 1.5, "cross-attention (Q: decoder, K and V: M)\nmask: source padding", role="attn",
              w=wd, h=0.8, fontsize=7.5)
        cross_y.append(y0 + 1.5)
        d.arrow((xd, y0 + 1.9), (xd, y0 + 2.15))
        d.box(xd, y0 + 2.45, "feed-forward, per position", role="ffn", w=wd, h=0.55, fontsize=8)
        d.arrow((xd, y0 + 2.73), (xd, y0 + layer_h))
    # the encoder's end: final LayerNorm -> the memory, once
    d.box(xe, top + 0.45, "final LayerNorm", role="norm", w=we, h=0.55, fontsize=8)
    d.arrow((xe, top), (xe, top + 0.17))
    mid = (cross_y[0] + cross_y[-1]) / 2
    m_lo, m_hi = min(cross_y[0] - 0.75, mid - 1.2), max(cross_y[-1] + 0.75, mid + 1.2)
    d.box(xm, (m_lo + m_hi) / 2, "memory M\nS × C\n\ncomputed once\nper sentence", role="memory", w=1.9,
          h=m_hi - m_lo, fontsize=8, bold=True)
    d.line([(xe + we / 2, top + 0.45), (xm, top + 0.45)], color=mem, width=1.6)
    d.arrow((xm, top + 0.45), (xm, m_hi), color=mem, width=1.6)
    for y in cross_y:                                   # one arrow per decoder layer: M as keys and values
        d.arrow((xm + 0.95, y), (xd - wd / 2, y), text="K, V", color=mem, width=1.6,
                text_offset=(0.0, 0.05)).set_gid(MEMORY_ARROW)
    # the decoder's head
    d.box(xd, top + 0.45, "final LayerNorm", role="norm", w=wd, h=0.55, fontsize=8)
    d.arrow((xd, top), (xd, top + 0.17))
    d.arrow((xd, top + 0.73), (xd, top + 1.05))
    d.box(xd, top + 1.35, "linear → softmax over the target vocabulary", role="embed", w=wd, h=0.55, fontsize=8)
    d.arrow((xd, top + 1.63), (xd, top + 1.95))
    d.box(xd, top + 2.25, "next word  $y_t$  (fed back as the next input)", role="token", w=wd, h=0.55, fontsize=8)
    d.text(xm, 1.15, "every sub-layer f sits in a residual:\nx ← LN(x + f(x)) in the paper (Post-Norm),\n"
           "x ← x + f(LN(x)) in Pre-Norm;\nthe paper: N = 6 layers per stack", fontsize=7, italic=True)
    return d.figure


# --- chapter 4 ---
def draw_qkv_flow() -> Figure:
    """Self-attention's data flow with every shape: X -> W_Q, W_K, W_V -> Q, K, V -> QK^T/sqrt(d_k) -> mask ->
    softmax -> weights x V -> output. Chapter 4.

    Example: fig = draw_qkv_flow()   # a Figure; the chapter shows it, tests read its labels
    """
    d = Diagram(15.2, 6.6, title="Self-attention: one sequence in, one sequence out, no loop over positions")
    bw, bh = 1.7, 1.0                                       # box size; arrows run edge to edge
    d.box(1.1, 3.5, "X\ntokens\nT × $d_{model}$", role="embed", w=1.6, h=1.3)
    rows = {"Q": 5.5, "K": 3.5, "V": 1.3}
    for name, y in rows.items():
        d.arrow((1.9, 3.5), (2.55, y), curve=0.0)
        d.box(3.4, y, f"$W_{name}$\n$d_{{model}}$ × $d_{name.lower() if name != 'Q' else 'k'}$", w=bw, h=bh)
        d.arrow((4.25, y), (4.95, y))
        dim = "$d_v$" if name == "V" else "$d_k$"
        d.box(5.8, y, f"{name}\nT × {dim}", role="attn", w=bw, h=bh)
    d.arrow((6.65, 5.5), (7.55, 4.75))
    d.arrow((6.65, 3.5), (7.55, 4.25))
    d.box(8.5, 4.5, "$QK^\\top / \\sqrt{d_k}$\nscores, T × T", role="attn", w=1.9, h=bh)
    d.arrow((9.45, 4.5), (10.15, 4.5))
    d.box(11.0, 4.5, "mask\n(optional)\nT × T", role="plain", w=bw, h=bh + 0.2, dashed=True)
    d.arrow((11.85, 4.5), (12.55, 4.5))
    d.box(13.5, 4.5, "softmax\nper row\nT × T", role="plain", w=1.9, h=bh + 0.2)
    d.arrow((13.5, 3.9), (13.5, 1.85), text="weights", text_offset=(0.45, 0.0))
    d.arrow((6.65, 1.3), (12.55, 1.3), text="values")
    d.box(13.5, 1.3, "weights × V\noutput\nT × $d_v$", role="attn", w=1.9, h=bh + 0.1)
    d.text(8.5, 3.2, "every query against every key:\nall T × T scores at once", fontsize=8, italic=True)
    return d.figure


# --- chapter 6 ---

def draw_head_split():
    """Multi-head attention as data flow: project x, split C into H chunks of D = C/H, attend per head, concat, W_O.

    Chapter 6. Rows of the Q, K, V strips are the heads: head h reads chunk h of each and writes chunk h of the
    concatenation, which out_proj (W_O) mixes back into one (T, C) output.
    """
    d = Diagram(14.4, 6.9, title="Multi-head attention: split C into H heads of D = C / H, attend, concatenate, mix")
    mid = 3.6
    d.box(0.8, mid, "x\n(T, C)", role="token", w=1.2, h=1.0)
    d.box(2.75, mid, "$W_Q, W_K, W_V$\nC → C each", role="attn", w=1.9, h=1.2)
    d.arrow((1.4, mid), (1.8, mid))
    rows = [5.7, 4.3, 2.9, 1.5]                      # head 1, head 2, ..., head H
    names = ["head 1", "head 2", None, "head H"]
    cols = {"Q": 4.85, "K": 5.45, "V": 6.05}
    for name, cx in cols.items():
        d.text(cx, rows[0] + 0.75, name, fontsize=10)
    d.text(5.45, rows[-1] - 0.8, "each row: one chunk\nof D columns", fontsize=8, italic=True)
    for y, name in zip(rows, names):
        if name is None:                             # the rows between head 2 and head H
            for x in (*cols.values(), 8.4, 10.5):
                d.text(x, y, "⋮", fontsize=12)
            continue
        d.arrow((3.7, mid), (4.5, y), color="#888888", width=0.9)
        for cx in cols.values():
            d.box(cx, y, "D", role="attn", w=0.55, h=0.75, fontsize=8)
        d.arrow((6.35, y), (7.1, y))
        d.box(8.4, y, f"{name}\nsoftmax($QK^T/\\sqrt{{D}}$) V", role="attn", w=2.6, h=0.95, fontsize=8)
        d.arrow((9.7, y), (10.2, y))
        d.box(10.5, y, name.split()[1], role="attn", w=0.6, h=0.95, fontsize=8)
        d.arrow((10.8, y), (11.6, mid), color="#888888", width=0.9)
    d.text(10.5, rows[0] + 0.75, "concat", fontsize=9)
    d.text(10.5, rows[-1] - 0.8, "(T, H·D) = (T, C)", fontsize=8, italic=True)
    d.box(12.15, mid, "$W_O$\nC → C", role="attn", w=1.1, h=1.0)
    d.arrow((12.7, mid), (13.1, mid))
    d.box(13.7, mid, "out\n(T, C)", role="token", w=1.1, h=1.0)
    return d.figure


def _norm_column(d: Diagram, cx: float, pre: bool):
    """One block, bottom to top, at centre cx: Pre-Norm x + f(LN(x)) or Post-Norm LN(x + f(x)); returns nothing."""
    red = "#c0392b"
    d.box(cx, 1.0, "x (from the block below)", role="token", w=3.0, h=0.6, fontsize=8)
    y = 1.3
    for sub, role in (("multi-head attention", "attn"), ("FFN", "ffn")):
        branch = y + 0.2                            # where the residual leaves the main path
        steps = [("LayerNorm", "norm"), (sub, role)] if pre else [(sub, role)]
        for text, r in steps:
            d.arrow((cx, y), (cx, y + 0.5))
            y += 0.85
            d.box(cx, y, text, role=r, w=2.6, h=0.7)
            y += 0.35
        d.arrow((cx, y), (cx, y + 0.4))
        y += 0.62
        d.circle(cx, y)
        d.line([(cx, branch), (cx - 1.75, branch), (cx - 1.75, y)], color=red, width=1.6)
        d.arrow((cx - 1.75, y), (cx - 0.22, y), color=red, width=1.6)
        y += 0.22
        if not pre:
            d.arrow((cx, y), (cx, y + 0.5))
            y += 0.85
            d.box(cx, y, "LayerNorm", role="norm", w=2.6, h=0.7)
            y += 0.35
    d.arrow((cx, y), (cx, y + 0.5))
    y += 0.8
    if pre:
        d.box(cx, y, "to the next block\n(after the last one: a final LayerNorm)", role="token", w=3.9, h=0.7,
              fontsize=8)
    else:
        d.box(cx, y, "to the next block", role="token", w=3.0, h=0.6, fontsize=8)


def draw_post_pre_norm():
    """Post-Norm (Vaswani et al. 2017, BERT) and Pre-Norm (GPT-2 and later) blocks side by side. Chapter 6.

    Red: the residual paths. In Post-Norm every path from the output back to x passes a LayerNorm; in
    Pre-Norm the residual path has none, which is why Pre-Norm's gradients stay even and it trains without warmup.
    """
    d = Diagram(12.6, 10.0, title="Where the LayerNorm goes")
    for cx, pre, head, rule in ((3.3, False, "Post-Norm (2017 paper, BERT)", "x ← LN(x + f(x))"),
                                (9.4, True, "Pre-Norm (GPT-2 and later)", "x ← x + f(LN(x))")):
        d.text(cx - 0.3, 9.7, head, fontsize=10)
        d.text(cx - 0.3, 9.3, rule, fontsize=9, italic=True)
        _norm_column(d, cx, pre)
    d.text(3.1, 0.35, "every path back to x passes a LayerNorm", fontsize=8, color="#c0392b")
    d.text(9.2, 0.35, "the residual path (red) has no LayerNorm on it", fontsize=8, color="#c0392b")
    return d.figure


# --- chapter 9 ---

RLHF_STEPS = [("pre-trained LM", "next token\non raw text"), ("SFT model", "prompts +\nwritten answers"),
              ("people rank answers", "several samples\nper prompt"), ("reward model", "learns to score\nas they rank"),
              ("policy optimisation", "raise the reward, stay\nnear the SFT model\n(KL penalty)")]


def draw_rlhf():
    """After pre-training: supervised fine-tuning, then RLHF's three steps (Ouyang et al. 2022), with the loop
    from the improved policy back to new samples for people to rank. Chapter 9."""
    d = Diagram(15.0, 3.6, title="After pre-training: SFT, then RLHF's three steps")
    xs = [1.5 + 3.0 * i for i in range(len(RLHF_STEPS))]
    for i, (x, (title, sub)) in enumerate(zip(xs, RLHF_STEPS)):
        d.box(x, 2.2, "", role="memory" if i in (0, 1, 4) else "plain", w=2.6, h=1.9)
        d.text(x, 2.75, title, fontsize=9)
        d.text(x, 2.0, sub, fontsize=8)
        if i:
            d.arrow((xs[i - 1] + 1.3, 2.2), (x - 1.3, 2.2))
    d.arrow((xs[4], 1.25), (xs[2], 1.25), curve=-0.25, dashed=True, color="#777777")
    d.text((xs[2] + xs[4]) / 2, 0.25, "the improved policy writes new samples to rank", fontsize=8, color="#555555")
    return d.figure
