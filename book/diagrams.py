"""Architecture diagrams drawn by code: boxes, arrows and labels in one style. Chapters 2-10.

Every diagram in the book is a function in its chapter's module (book.chapters) that returns a matplotlib Figure
(pyplot-free, like book.plots), drawn with the Diagram below, so it is reproducible, reviewable in a diff, and as
sharp as any other figure (PNG at plots.PIXEL_RATIO x).
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

from .checks import one_of, positive_number
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

    def __init__(self, width: float, height: float, title: str = "", alt: Optional[str] = None):
        positive_number(width=width, height=height)   # in grid units
        self.width, self.height = width, height
        self.title, self.labels = title, {"box": [], "group": [], "note": []}   # what the alt text names
        self.alt = alt
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
        self.figure._book_alt = self.alt_text   # read when the figure is shown (book.plots.alt_text)

    def alt_text(self) -> str:
        """The diagram in words: its title, then its boxes, frames and other labels in the order they were drawn
        (`alt` of the constructor replaces it)."""
        if self.alt is not None:
            if not isinstance(self.alt, str) or not self.alt.strip():
                raise ValueError(f"alt must be a non-empty str describing the diagram, got {self.alt!r}")
            return self.alt.strip()
        def flat(items):
            return ", ".join(" ".join(str(t).split()) for t in items)
        parts = [f"Diagram: {self.title}" if self.title else "Diagram"]
        for key, name in (("box", "boxes"), ("group", "frames"), ("note", "labels")):
            if self.labels[key]:
                parts.append(f"{name}: {flat(self.labels[key])}")
        return "; ".join(parts)

    def box(self, x: float, y: float, text: str = "", role: str = "plain", w: float = 1.2, h: float = 0.7,
            fontsize: Optional[float] = None, dashed: bool = False, bold: bool = False):
        """A rounded box centred at (x, y), w x h units, with centred text. Returns its (left, bottom, w, h)."""
        fill, edge = _role(role)
        self.ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0,rounding_size=0.12",
                                         facecolor=fill, edgecolor=edge, linewidth=1.4,
                                         linestyle="--" if dashed else "-"))
        if text:
            self.labels["box"].append(text)
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
            self.labels["group"].append(label)
            if label_at == "top":
                self.ax.text((x0 + x1) / 2, y1 + 0.08, label, ha="center", va="bottom", fontsize=FONT, color=edge)
            else:
                self.ax.text(x0 - 0.1, (y0 + y1) / 2, label, ha="right", va="center", fontsize=FONT, color=edge)

    def circle(self, x: float, y: float, text: str = "+", r: float = 0.22, role: str = "plain"):
        """A small circle (a sum, a product) at (x, y)."""
        fill, edge = _role(role)
        self.ax.add_patch(Circle((x, y), r, facecolor=fill, edgecolor=edge, linewidth=1.3))
        self.labels["note"].append(text)
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
            self.labels["note"].append(text)
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
        self.labels["note"].append(text)
        self.ax.text(x, y, text, ha=ha, va=va, fontsize=fontsize or FONT, color=color,
                     fontstyle="italic" if italic else "normal")


# --- chapters 2-3 ---

_SRC = ["red", "cat", "likes", "hen"]   # a sentence of the toy task (book.tasks.ToyTranslation) ...
_TGT = ["<bos>", "CAT", "RED", "HEN", "LIKES"]   # ... and its reordered translation, fed from <bos>


# --- chapter 7 ---


# --- chapter 8 ---


# --- chapter 6 ---


# --- chapter 9 ---
