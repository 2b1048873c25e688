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
    if role not in ROLES:
        raise ValueError(f"role must be one of {sorted(ROLES)}, got {role!r}")
    return ROLES[role]


class Diagram:
    """A blank canvas of width x height grid units with helpers for boxes, arrows, circles and labels."""

    def __init__(self, width: float, height: float, title: str = ""):
        for name, v in (("width", width), ("height", height)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"{name} must be a positive number of grid units, got {v!r}")
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
        """An arrow from start to end (grid units); curve bends it (radians-ish, + is counter-clockwise)."""
        self.ax.add_patch(FancyArrowPatch(tuple(start), tuple(end), arrowstyle="-|>", mutation_scale=10,
                                          color=color, linewidth=width, linestyle="--" if dashed else "-",
                                          connectionstyle=f"arc3,rad={curve}", shrinkA=0, shrinkB=0))
        if text:
            mx, my = (start[0] + end[0]) / 2 + text_offset[0], (start[1] + end[1]) / 2 + text_offset[1]
            self.ax.text(mx, my, text, ha="center", va="bottom", fontsize=FONT - 1, color=color)

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
